package armtest

import "fmt"

// as returns v as a T. The kinds' functions receive only what their kind's model and find
// functions return, so another type is a bug in the server, reported by a panic naming both.
func as[T any](v any) T {
	t, ok := v.(T)
	if !ok {
		panic(fmt.Sprintf("armtest: a %T where a %T is stored", v, t))
	}
	return t
}
