package textsafe

import (
	"strings"
	"testing"
	"unicode"
)

// hostile holds each kind of character a terminal would obey: an OSC
// title change ended by BEL, a screen clear, NUL, a right-to-left
// override, an isolate, a zero-width space, a line separator, a tab, a
// newline, a C1 CSI and a byte that is not UTF-8.
const hostile = "a\x1b]0;PWNED\x07\x1b[2J\x00b\u202etxt.exe\u2066c\u200bd\u2028e\tf\ng\u009bh\xffé—≤"

func TestLineEscapesEveryUnsafeCharacter(t *testing.T) {
	got := Line(hostile)
	for _, r := range got {
		if unsafe(r) || r == unicode.ReplacementChar {
			t.Errorf("%q: %U survived", got, r)
		}
	}
	// Escapes are visible and readable: ESC, RLO and the bad byte show up.
	for _, want := range []string{`\x1b]0;PWNED\x07`, `\u202etxt.exe`, `\xff`, `\n`, `\t`, "é—≤"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

func TestTextKeepsNewlines(t *testing.T) {
	got := Text(hostile)
	if strings.Count(got, "\n") != strings.Count(hostile, "\n") || strings.Contains(got, "\x1b") {
		t.Errorf("%q", got)
	}
}

func TestMarkdownEscapesHTML(t *testing.T) {
	got := Markdown(`<script>alert(1)</script><img src=x onerror=alert(1)>|&` + "\x1b")
	for _, bad := range []string{"<", ">", "\x1b"} {
		if strings.Contains(got, bad) {
			t.Errorf("%q contains %q", got, bad)
		}
	}
	for _, want := range []string{`\|`, "&amp;", "&lt;script&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

func TestCleanTextIsUnchangedWithoutAllocating(t *testing.T) {
	s := "fixture__steps eval_loss ≤ 2.6 — no findings\uFFFD"
	if got := Line(s); got != s {
		t.Errorf("%q became %q", s, got)
	}
	if n := testing.AllocsPerRun(100, func() { Line(s) }); n != 0 {
		t.Errorf("%v allocations for clean text", n)
	}
}
