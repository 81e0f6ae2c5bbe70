package sink

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	ep := Endpoint{Addr: "h:8123", User: "alice", Password: "s3cr3t/p@ss"}
	auth := ep.AuthHeader()
	tests := []struct{ in, want string }{
		{"wrong password s3cr3t/p@ss for alice", "wrong password xxxxx for alice"},
		{"Authorization: " + auth, "Authorization: xxxxx"},
		{"creds " + strings.TrimPrefix(auth, "Basic "), "creds xxxxx"},
		{"url http://alice:s3cr3t%2Fp@ss@h", "url http://alice:xxxxx@h"},
		{"url http://alice:s3cr3t%2Fp%40ss@h", "url http://alice:xxxxx@h"},
		{"nothing secret", "nothing secret"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in, ep); got != tt.want {
			t.Errorf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Redact("s3cr3t", Endpoint{Addr: "h:1"}); got != "s3cr3t" {
		t.Errorf("Redact without credentials: got %q", got)
	}
}

// marker stands for row data in the tests of RedactRows: it must never
// survive.
const marker = "MARKER_5f3a"

// TestRedactRows_clickhouse1816 runs RedactRows over error texts that
// ClickHouse 18.16 answered to rows holding marker (collected with
// chtest; TestClickHouse_redactRows in clickhouse_test.go gets them
// live), and over the shape of a newer server's: marker goes, the code,
// the exception's words, the key, the row and the class stay.
func TestRedactRows_clickhouse1816(t *testing.T) {
	tests := []struct {
		name, in string
		keep     []string
	}{
		{"27 string into UInt64",
			"Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: MARKER_5f3a\",\"s\":\"MARKER_5f3a\"}: (while read the value of key id): (at row 2)\n, e.what() = DB::Exception",
			[]string{"Code: 27", "Cannot parse input: expected \" before: …", "(while read the value of key id)", "(at row 2)", "e.what() = DB::Exception"}},
		{"27 1.5 into UInt64, no key",
			"Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: .5,\"s\":\"MARKER_5f3a\"}: (at row 2)\n, e.what() = DB::Exception",
			[]string{"expected , before: …: (at row 2)"}},
		{"27 marker text inside the copy",
			"Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: x: (at row 9) MARKER_5f3a\"}: (at row 2)\n, e.what() = DB::Exception",
			[]string{"(at row 2)"}},
		{"26 number into String",
			"Code: 26, e.displayText() = DB::Exception: Cannot parse JSON string: expected opening quote: (while read the value of key s): (at row 2)\n, e.what() = DB::Exception",
			[]string{"Code: 26, e.displayText() = DB::Exception: Cannot parse JSON string: expected opening quote: (while read the value of key s): (at row 2)\n, e.what() = DB::Exception"}},
		{"117 unknown field",
			"Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: MARKER_5f3a: (at row 2)\n, e.what() = DB::Exception",
			[]string{"Unknown field found while parsing JSONEachRow format: …: (at row 2)"}},
		{"6 toUInt64 of a string",
			"Code: 6, e.displayText() = DB::Exception: Cannot parse string 'MARKER_5f3a' as UInt64: syntax error at begin of string. Note: there are toUInt64OrZero and toUInt64OrNull functions, which returns zero/NULL instead of throwing exception., e.what() = DB::Exception",
			[]string{"Cannot parse string '…' as UInt64: syntax error at begin of string"}},
		{"6 parsed just",
			"Code: 6, e.displayText() = DB::Exception: Cannot parse string '123MARKER_5f3a' as Float64: syntax error at position 3 (parsed just '123'). Note: there are toFloat64OrZero and toFloat64OrNull functions, which returns zero/NULL instead of throwing exception., e.what() = DB::Exception",
			[]string{"(parsed just '…')"}},
		{"38 toDate", "Code: 38, e.displayText() = DB::Exception: Cannot parse date: value is too short: Cannot parse Date from String, e.what() = DB::Exception",
			[]string{"Code: 38, e.displayText() = DB::Exception: Cannot parse date: value is too short: Cannot parse Date from String, e.what() = DB::Exception"}},
		{"41 DateTime", "Code: 41, e.displayText() = DB::Exception: Cannot parse datetime: (while read the value of key dt): (at row 2)\n, e.what() = DB::Exception",
			[]string{"Cannot parse datetime: (while read the value of key dt): (at row 2)"}},
		{"49 Enum", "Code: 49, e.displayText() = DB::Exception: Unknown element 'MARKER_5f3a' for type Enum8('a' = 1): (while read the value of key e), e.what() = DB::Exception",
			[]string{"Unknown element '…' for type Enum8", "(while read the value of key e)"}},
		{"69 Decimal", "Code: 69, e.displayText() = DB::Exception: Too many digits in decimal value: (while read the value of key dec), e.what() = DB::Exception",
			[]string{"Too many digits in decimal value: (while read the value of key dec)"}},
		{"72 minus into UInt64", "Code: 72, e.displayText() = DB::Exception: Unsigned type must not contain '-' symbol: (while read the value of key id): (at row 2)\n, e.what() = DB::Exception",
			[]string{"Unsigned type must not contain '…' symbol: (while read the value of key id): (at row 2)"}},
		{"131 FixedString", "Code: 131, e.displayText() = DB::Exception: Too large value for FixedString(2): (while read the value of key fs): (at row 2)\n, e.what() = DB::Exception",
			[]string{"Too large value for FixedString(2): (while read the value of key fs): (at row 2)"}},
		{"376 UUID, unquoted copy", "Code: 376, e.displayText() = DB::Exception: Cannot parse uuid MARKER_5f3a\"}: (while read the value of key uu): (at row 2)\n, e.what() = DB::Exception",
			[]string{"Cannot parse uuid …: (while read the value of key uu): (at row 2)"}},
		{"newer server", "Code: 27. DB::Exception: Cannot parse input: expected '\"' before: 'MARKER_5f3a\"}': (while reading the value of key id): (at row 1)\n: While executing ParallelParsingBlockInputFormat. (CANNOT_PARSE_INPUT_ASSERTION_FAILED) (version 23.8.1.1 (official build))",
			[]string{"expected '\"' before: …: (while reading the value of key id): (at row 1)", "(CANNOT_PARSE_INPUT_ASSERTION_FAILED)"}},
		{"newer server diagnostics", "Code: 27. DB::Exception: Cannot parse input: expected ',' before: 'x': \nRow 1:\nColumn 0,   name: id, type: UInt64, parsed text: \"MARKER_5f3a\"ERROR\n: (at row 1)\n. (CANNOT_PARSE_INPUT_ASSERTION_FAILED)",
			[]string{"expected ',' before: …", "(at row 1)"}},
		{"newer server diagnostics alone", "Code: 27. DB::Exception: Cannot parse input:\nRow 1:\nColumn 0,   name: id,   type: UInt64, parsed text: \"MARKER_5f3a\"ERROR\nERROR: garbage after UInt64: \"MARKER_5f3a\"\n: (at row 1)\n. (CANNOT_PARSE_INPUT_ASSERTION_FAILED)",
			[]string{"Column 0,   name: id,   type: UInt64, parsed text: …\n", "ERROR: garbage after UInt64: \"…\"", "(at row 1)"}},
		{"469 constraint, unquoted values", "Code: 469. DB::Exception: Constraint `positive` for table default.pay (uuid) is violated at row 1. Expression: (amount > 0). Column values: amount = -41MARKER_5f3a, card = [4111,1111]. (VIOLATED_CONSTRAINT) (version 23.8.1.1 (official build))",
			[]string{"Constraint `positive` for table default.pay (uuid) is violated at row 1. Expression: (amount > 0). Column values: …", "(VIOLATED_CONSTRAINT)"}},
		{"60 unknown table, an apostrophe", "Code: 60, e.displayText() = DB::Exception: Table default.later doesn't exist., e.what() = DB::Exception",
			[]string{"Code: 60, e.displayText() = DB::Exception: Table default.later doesn't exist., e.what() = DB::Exception"}},
		{"unknown shape with a lone quote", "Code: 999, e.displayText() = DB::Exception: something odd \"MARKER_5f3a: nothing after",
			[]string{"something odd \"…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactRows(tt.in)
			if strings.Contains(got, marker) || strings.Contains(got, "MARKER") {
				t.Errorf("got %q, want no %s", got, marker)
			}
			for _, k := range tt.keep {
				if !strings.Contains(got, k) {
					t.Errorf("got %q, want it to keep %q", got, k)
				}
			}
		})
	}
}

// FuzzRedactRows checks that a value quoted in an error text, or copied
// after "before: ", never survives RedactRows, whatever text without
// quotes surrounds it.
func FuzzRedactRows(f *testing.F) {
	f.Add("Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , ", "}: (at row 2)\n, e.what() = DB::Exception")
	f.Add("Cannot parse string ", " as UInt64: (at row 1)")
	f.Add("x format: ", ": (while read the value of key a): (at row 1)")
	f.Fuzz(func(t *testing.T, before, after string) {
		if strings.ContainsAny(before+after, `'"`) || strings.Contains(before+after, "MARK") {
			return
		}
		// ClickHouse opens a quote after a space or a bracket; after a
		// letter, a single quote is an apostrophe.
		for _, in := range []string{before + " before: " + marker + after, before + " '" + marker + "'" + after, before + `"` + marker + `"` + after} {
			if got := RedactRows(in); strings.Contains(got, marker) {
				t.Fatalf("RedactRows(%q) = %q: the row data survived", in, got)
			}
		}
	})
}

// TestCutFollowingRows: the "before: " echo of a refused row keeps the
// rest of that row and loses the rows after it, which 18.16 copies up to
// the end of the request; an escaped backslash before an n does not end
// the row. The texts are 18.16's and a newer server's answers.
func TestCutFollowingRows(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected " before: x2","s":"b"}\n{"id":3,"s":"NEXT_ROW"}\n: (while read the value of key id): (at row 2)` + "\n, e.what() = DB::Exception",
			`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected " before: x2","s":"b"}\n…: (while read the value of key id): (at row 2)` + "\n, e.what() = DB::Exception"},
		{`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected " before: x2","s":"b\\nc\\\\d"}\n{"id":3,"s":"NEXT_ROW"}\n: (while read the value of key id): (at row 2)`,
			`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected " before: x2","s":"b\\nc\\\\d"}\n…: (while read the value of key id): (at row 2)`},
		{`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: \n{"id":3,"s":"NEXT_ROW"}\n: (at row 2)`,
			`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: \n…: (at row 2)`},
		{`Code: 27. DB::Exception: Cannot parse input: expected '"' before: 'x}\n{"id":3,"s":"NEXT_ROW"}\n': (while reading the value of key id): (at row 1)`,
			`Code: 27. DB::Exception: Cannot parse input: expected '"' before: 'x}\n…: (while reading the value of key id): (at row 1)`},
		{`Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: zz: (at row 2)`,
			`Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: zz: (at row 2)`},
		{`Code: 27, expected , before: x"}`, `Code: 27, expected , before: x"}`},
	} {
		if got := cutFollowingRows(tt.in); got != tt.want {
			t.Errorf("cutFollowingRows(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}
