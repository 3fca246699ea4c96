// Package textsafe makes tenant-written text (history names, metric names,
// objectives, reasons quoting them) safe to print: a terminal must show it,
// not obey it. It is the one place every text renderer (planner forecast,
// report, explain, backtest tables; report Markdown and HTML cells) escapes
// such text.
//
// Escaped, as a visible Go-style escape (\x1b, \u202e): C0 and C1 control
// characters and DEL (ESC sequences retitle or clear a terminal, BEL rings,
// NUL truncates), Unicode format characters (bidirectional overrides and
// isolates such as U+202E that reorder what follows, zero-width
// characters, the BOM), the line and paragraph separators, and bytes that
// are not UTF-8. Everything else, including non-ASCII letters, "—" and
// "≤", is kept.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line escapes s for use inside one line of output: newlines and tabs are
// escaped too, so a name cannot start a forged line or shift a column.
func Line(s string) string { return escape(s, false) }

// Text escapes a whole rendered text: like Line, but newlines are kept
// (the renderer's own line structure).
func Text(s string) string { return escape(s, true) }

// Markdown escapes s for a Markdown table cell or heading: Line, then the
// HTML a Markdown renderer would pass through (<script>, <img onerror>)
// as entities, and the cell separator "|".
func Markdown(s string) string { return mdReplacer.Replace(Line(s)) }

var mdReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "|", `\|`)

func unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

func escape(s string, keepNewlines bool) string {
	clean := true
	for i, r := range s {
		if (unsafe(r) && !(keepNewlines && r == '\n')) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			clean = false
			break
		}
	}
	if clean {
		return s // the common case: no allocation
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepNewlines && r == '\n':
			b.WriteByte('\n')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case unsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
