package policy_test

import (
	"os"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// TestReasonsDocumented checks that the troubleshooting guide holds the
// table generated from policy.Reasons, so that no reason goes
// undocumented; UPDATE=1 rewrites the table.
func TestReasonsDocumented(t *testing.T) {
	const path = "../docs/troubleshooting.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin := strings.Index(doc, "<!-- reasons:begin")
	end := strings.Index(doc, "<!-- reasons:end -->")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no reasons:begin / reasons:end markers", path)
	}
	begin += strings.Index(doc[begin:], "-->\n") + len("-->\n")
	want := policy.ReasonsMarkdown()
	if doc[begin:end] == want {
		return
	}
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile(path, []byte(doc[:begin]+want+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's reasons table is stale (run UPDATE=1 go test ./policy -run TestReasonsDocumented); want:\n%s", path, want)
}

// TestReasonsTable checks the table: every reason once, each with a
// verdict, a source and both texts.
func TestReasonsTable(t *testing.T) {
	seen := map[policy.Reason]bool{}
	for _, r := range policy.Reasons() {
		if seen[r.Reason] {
			t.Errorf("%s listed twice", r.Reason)
		}
		seen[r.Reason] = true
		if len(r.Verdicts) == 0 || r.Source == "" || r.Refused == "" || r.Fix == "" {
			t.Errorf("%s: incomplete entry %+v", r.Reason, r)
		}
		if !strings.HasSuffix(string(r.Reason), "Error") {
			t.Errorf("%s: reason names end in Error, as KEP-5554's do", r.Reason)
		}
	}
	if got := strings.Count(policy.ReasonNames(), ",") + 1; got != len(seen) {
		t.Errorf("ReasonNames lists %d reasons, the table %d", got, len(seen))
	}
}
