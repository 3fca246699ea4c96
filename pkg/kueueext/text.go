package kueueext

import (
	"unicode/utf8"

	"github.com/progress-planner/planner/internal/textsafe"
)

// printable reports whether s needs no escaping (internal/textsafe: no
// control characters such as ESC, BEL or NUL, no format characters such
// as bidirectional overrides, valid UTF-8). Annotations must be; tenant
// text that reaches a terminal through kubectl must not carry escapes.
func printable(s string) bool { return textsafe.Line(s) == s }

// outputText is tenant text made safe for a status field or an Event.
func outputText(s string) string { return textsafe.Line(s) }

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
