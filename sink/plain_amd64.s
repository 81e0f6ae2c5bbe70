#include "textflag.h"

// func plainPrefix(v []byte) int
//
// SSE2, which every amd64 CPU has: 16 bytes a round, each compared with
// '"' and '\\', against 0x1f (unsigned minimum), and its top bit taken
// (not ASCII). Returns the index of the first byte that is not plain, or
// where fewer than 16 bytes are left.
TEXT ·plainPrefix(SB), NOSPLIT, $0-32
	MOVQ v_base+0(FP), SI
	MOVQ v_len+8(FP), CX
	XORQ AX, AX
	MOVQ $0x2222222222222222, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5c5c5c5c5c5c5c5c, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x1f1f1f1f1f1f1f1f, DX
	MOVQ DX, X3
	PUNPCKLQDQ X3, X3

loop:
	LEAQ 16(AX), DX
	CMPQ DX, CX
	JHI  done
	MOVOU (SI)(AX*1), X0
	MOVO X0, X4
	PMINUB X3, X4
	PCMPEQB X0, X4  // 0xff where the byte is below 0x20
	MOVO X0, X5
	PCMPEQB X1, X5  // '"'
	MOVO X0, X6
	PCMPEQB X2, X6  // '\\'
	POR X5, X4
	POR X6, X4
	POR X0, X4      // and the byte's own top bit: not ASCII
	PMOVMSKB X4, DX
	TESTL DX, DX
	JNZ  found
	ADDQ $16, AX
	JMP  loop

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	MOVQ AX, ret+24(FP)
	RET
