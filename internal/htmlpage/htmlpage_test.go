package htmlpage

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
)

func TestShorten(t *testing.T) {
	if s, cut := Shorten("team-a/job", 40); s != "team-a/job" || cut {
		t.Errorf("Shorten(short) = %q %v", s, cut)
	}
	s, cut := Shorten("team-a/"+strings.Repeat("é", 50)+"-run-7", 20)
	if !cut || len([]rune(s)) != 20 || !strings.HasPrefix(s, "team-a/") || !strings.HasSuffix(s, "run-7") {
		t.Errorf("Shorten(long) = %q %v", s, cut)
	}
}

func TestCells(t *testing.T) {
	for in, want := range map[string]Cell{
		"2h10m [1h50m–2h30m]": {Text: "2h10m", Sub: "[1h50m–2h30m]", Num: true},
		"94.9% (plateaued)":   {Text: "94.9%", Sub: "(plateaued)", Num: true},
		"—":                   {Text: "—", Num: true},
	} {
		if got := NumCell(in); got != want {
			t.Errorf("NumCell(%q) = %+v, want %+v", in, got, want)
		}
	}
	if got := TextCell("running (last report 2h ago)"); got.Text != "running" || got.Sub != "last report 2h ago" {
		t.Errorf("TextCell = %+v", got)
	}
	tm := WithCell(template.Must(template.New("t").Parse(`{{range .}}{{template "cell" .}}{{end}}`)))
	var b bytes.Buffer
	if err := tm.Execute(&b, []Cell{NameCell(strings.Repeat("<x>", 30), 10), NumCell("1 [0–2]")}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if strings.Contains(got, "<x>") || !strings.Contains(got, `class="name" title="&lt;x&gt;`) || !strings.Contains(got, `<td class="num">1<span class="sub">[0–2]</span></td>`) {
		t.Errorf("cells rendered as %s", got)
	}
}
