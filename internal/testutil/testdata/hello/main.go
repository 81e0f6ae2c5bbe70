// Command hello is the smallest main package, for Build's test.
package main

func main() {}
