package plan

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCodesRegistered: every code the package writes is in the registry,
// once, in order.
func TestCodesRegistered(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`"(RT\d{3})"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range code.FindAllStringSubmatch(string(src), -1) {
			if _, ok := LookupCode(m[1]); !ok {
				t.Errorf("%s: code %s is not in Codes", f, m[1])
			}
		}
	}
	if !slices.IsSortedFunc(Codes, func(a, b CodeInfo) int { return strings.Compare(a.Code, b.Code) }) {
		t.Error("Codes is not in code order")
	}
	for i := 1; i < len(Codes); i++ {
		if Codes[i].Code == Codes[i-1].Code {
			t.Errorf("%s registered twice", Codes[i].Code)
		}
	}
	for _, c := range Codes {
		if c.AllowDestroy && c.Refused {
			t.Errorf("%s: --allow-destroy cannot accept what the broker refuses", c.Code)
		}
		if (c.AllowDestroy || c.Refused) && c.Severity != SeverityError {
			t.Errorf("%s: blocks an apply, so it is an error", c.Code)
		}
	}
}

// TestCodesDocumented: every registered code has its row in the JSON
// plan's table of codes, with the registry's severity, and its line in
// the package doc.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/plan-json.md")
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		sev := string(c.Severity)
		if c.AllowDestroy {
			sev = "error, warning with `--allow-destroy`"
		}
		row := "| `" + c.Code + "` | " + sev + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/plan-json.md has no row %q", row)
		}
		if !regexp.MustCompile(`(?m)^//\s+` + c.Code + `\s`).Match(pkg) {
			t.Errorf("plan/doc.go does not list %s", c.Code)
		}
	}
}

// TestBlockingError: the words, and so the user's next step, come from
// the registry.
func TestBlockingError(t *testing.T) {
	d := func(code string) Diagnostic { return Diagnostic{Code: code, Severity: SeverityError} }
	for _, c := range []struct {
		ds   []Diagnostic
		want string
	}{
		{[]Diagnostic{d(CodeReplaceQueueWithMessages)}, "1 change puts messages at risk (RT001); apply refuses unless destruction is allowed"},
		{[]Diagnostic{d(CodeManagedPolicyShadowed), d(CodeQueueHasConsumers)}, "2 changes put messages at risk (RT021, RT006); apply refuses unless destruction is allowed"},
		{[]Diagnostic{d(CodeTransientQueue), d(CodeUnknownPolicyKey)}, "RabbitMQ would refuse 2 changes of this plan (RT104, RT009); nothing was written: fix the spec (see the errors above)"},
		// Below 4.3.1 the broker accepts a native queue and does not delay
		// its retries: no refusal of RabbitMQ's.
		{[]Diagnostic{d(CodeNativeNeedsVersion)}, "RabbitMQ would accept 1 change of this plan and silently not delay retries (RT106); nothing was written: fix the spec (see the errors above)"},
		{[]Diagnostic{d(CodeNativeNeedsVersion), d(CodeRefusedArgument), d(CodeNativeNeedsVersion)}, "RabbitMQ would refuse 1 change of this plan (RT103), and accept 2 changes and silently not delay retries (RT106); nothing was written: fix the spec (see the errors above)"},
		{[]Diagnostic{d(CodeSpecConflict), d(CodeReplaceQueueWithMessages)}, "2 changes cannot be applied (RT007, RT001); nothing was written: fix the spec (see the errors above)"},
	} {
		if got := BlockingError(c.ds).Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
	if BlockingError(nil) != nil {
		t.Error("no blocking diagnostics, yet an error")
	}
}

// TestAnalyzersDocumented: docs/architecture.md's table of analyzers
// lists Check's, in Check's order.
func TestAnalyzersDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, a := range analyzers {
		i := strings.Index(string(doc), "| "+a.name+" |")
		if i < 0 || i < last {
			t.Errorf("docs/architecture.md: analyzer %q missing or out of Check's order", a.name)
		}
		last = i
	}
}
