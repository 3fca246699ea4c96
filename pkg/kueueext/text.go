package kueueext

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// printable reports whether s is valid UTF-8 made of printable characters
// only (unicode.IsPrint: no control characters such as ESC, BEL or NUL, no
// format characters such as bidirectional overrides, no separators other
// than the ASCII space). Tenant text that reaches a terminal through
// kubectl must not carry escape sequences.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// outputText is tenant text made safe for a status field or an Event: as
// it is when printable, else with every other character escaped the way Go
// quotes strings ("\x1b", "\u202e").
func outputText(s string) string {
	if printable(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// truncateString cuts s to at most n bytes, on a character boundary, and
// marks the cut.
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
