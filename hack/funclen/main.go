// Command funclen lists the functions of a Go tree longer than a limit,
// skipping tests and generated files. A function may run past the limit
// when a comment line starting "long:" inside it or in its doc says why;
// -strict exits 1 when one runs past without.
//
//	go run ./hack/funclen [-limit 120] [-strict] [DIR...]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type long struct {
	pos    string
	name   string
	lines  int
	reason string
}

func main() {
	limit := flag.Int("limit", 120, "report functions longer than this many lines")
	strict := flag.Bool("strict", false, "exit 1 when a function past the limit gives no reason")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var found []long
	for _, d := range dirs {
		fs, err := scan(d, *limit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		found = append(found, fs...)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	unexplained := 0
	for _, l := range found {
		why := l.reason
		if why == "" {
			why = "(no reason given)"
			unexplained++
		}
		fmt.Printf("%4d  %s  %s  %s\n", l.lines, l.pos, l.name, why)
	}
	fmt.Printf("%d functions over %d lines, %d without a reason\n", len(found), *limit, unexplained)
	if *strict && unexplained > 0 {
		os.Exit(1)
	}
}

// scan walks dir for non-test, non-generated Go files.
func scan(dir string, limit int) ([]long, error) {
	var out []long
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != dir && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || generated(path) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if n := end - start + 1; n > limit {
				out = append(out, long{pos: fmt.Sprintf("%s:%d", path, start), name: funcName(fn), lines: n, reason: reason(f, fn, fset)})
			}
		}
		return nil
	})
	return out, err
}

// reason is the text after "long:" in a comment of fn's doc or body.
func reason(f *ast.File, fn *ast.FuncDecl, fset *token.FileSet) string {
	from, to := fn.Pos(), fn.End()
	if fn.Doc != nil {
		from = fn.Doc.Pos()
	}
	for _, cg := range f.Comments {
		if cg.Pos() < from || cg.End() > to {
			continue
		}
		for _, c := range cg.List {
			t := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
			if r, ok := strings.CutPrefix(t, "long:"); ok {
				return strings.TrimSpace(r)
			}
		}
	}
	return ""
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// generated reports whether a file carries Go's "Code generated … DO NOT
// EDIT." line before its package clause.
func generated(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "package ") {
			return false
		}
		if strings.HasPrefix(l, "// Code generated ") && strings.HasSuffix(l, " DO NOT EDIT.") {
			return true
		}
	}
	return false
}
