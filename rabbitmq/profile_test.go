package rabbitmq

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func v(major, minor, patch int) Version { return Version{Major: major, Minor: minor, Patch: patch} }

// TestProfileFor holds each release to the behaviour rmqtopo gave it
// before the profiles existed (the *Since variables, NativeSince,
// exportSince, AtLeast(4, 3), Major == 3).
func TestProfileFor(t *testing.T) {
	none := Traits{}
	v40 := Traits{DefaultDeliveryLimit: 20, NegativeLimitIsNone: true, ClientDeathIgnored: true, QuorumPriorities: true}
	v430 := v40
	v430.NackUncounted, v430.ExportReadFastest = true, true
	v431 := v430
	v431.NativeDelayedRetry = true
	for _, c := range []struct {
		v       Version
		release Version
		want    Traits
		beyond  bool
	}{
		{v(3, 7, 0), v(3, 8, 0), none, false},
		{v(3, 10, 8), v(3, 8, 0), none, false},
		{v(3, 13, 7), v(3, 8, 0), none, false},
		{v(4, 0, 0), v(4, 0, 0), v40, false},
		{v(4, 2, 9), v(4, 0, 0), v40, false},
		{v(4, 3, 0), v(4, 3, 0), v430, false},
		{v(4, 3, 1), v(4, 3, 1), v431, false},
		{v(4, 3, 6), v(4, 3, 1), v431, false},
		{v(4, 4, 0), v(4, 3, 1), v431, true},
		{v(5, 0, 0), v(4, 3, 1), v431, true},
	} {
		p := ProfileFor(c.v)
		if diff := cmp.Diff(c.want, p.Traits()); diff != "" {
			t.Errorf("ProfileFor(%s) traits (-want +got):\n%s", c.v, diff)
		}
		if !p.Known() || p.Version() != c.v || p.Release() != c.release || p.Beyond() != c.beyond {
			t.Errorf("ProfileFor(%s) = %s, known %v, beyond %v; want release %s, beyond %v", c.v, p, p.Known(), p.Beyond(), c.release, c.beyond)
		}
	}
	u := ProfileFor(Version{})
	if u.Known() || u.Beyond() || u.Traits() != none || u.String() != "unknown" {
		t.Errorf("ProfileFor(unknown) = %s %+v, want an unknown profile with no traits", u, u.Traits())
	}
}

func TestProfileOf(t *testing.T) {
	if p, err := ProfileOf("4.3.6"); err != nil || !p.NativeDelayedRetry() || p.Version() != v(4, 3, 6) {
		t.Errorf("ProfileOf(4.3.6) = %s, %v", p, err)
	}
	if p, err := ProfileOf("rabbit"); err == nil || p.Known() {
		t.Errorf("ProfileOf(rabbit) = %s, %v; want unknown and an error", p, err)
	}
}

func TestFirst(t *testing.T) {
	for name, c := range map[string]struct {
		has  func(Profile) bool
		want Version
	}{
		"native":     {Profile.NativeDelayedRetry, v(4, 3, 1)},
		"export":     {Profile.ExportReadFastest, v(4, 3, 0)},
		"nack":       {Profile.NackUncounted, v(4, 3, 0)},
		"death":      {Profile.ClientDeathIgnored, v(4, 0, 0)},
		"limit":      {func(p Profile) bool { return p.DefaultDeliveryLimit() > 0 }, v(4, 0, 0)},
		"no release": {func(Profile) bool { return false }, Version{}},
	} {
		if got := First(c.has); got != c.want {
			t.Errorf("First(%s) = %s, want %s", name, got, c.want)
		}
	}
}

// TestTable: entries in order, each tested release inside its entry's
// span, and the series the suite runs, which Makefile and .ci/run read
// (rabbitnode releases).
func TestTable(t *testing.T) {
	for i := 1; i < len(Table); i++ {
		if !Table[i-1].From.Less(Table[i].From) {
			t.Errorf("Table[%d] (%s) is not after Table[%d] (%s)", i, Table[i].From, i-1, Table[i-1].From)
		}
	}
	for _, e := range Table {
		if e.Cite == "" {
			t.Errorf("entry %s cites nothing", e.From)
		}
		if e.Tested != nil && ProfileFor(e.Tested.Version).Release() != e.From {
			t.Errorf("entry %s: its tested release %s is another entry's", e.From, e.Tested.Version)
		}
	}
	var series []string
	for _, r := range TestedReleases() {
		series = append(series, r.Series())
	}
	if diff := cmp.Diff([]string{"3.10", "4.0", "4.3"}, series); diff != "" {
		t.Errorf("tested series (-want +got):\n%s", diff)
	}
	if p := Profiles(); len(p) != len(Table) || p[len(p)-1].Version() != Table[len(Table)-1].From {
		t.Errorf("Profiles() = %v", p)
	}
}

// TestCapabilities: every trait is listed, under its field's name, with
// the accessor's value; 4.0.5 and 4.3.6 differ in the 4.3 ones.
func TestCapabilities(t *testing.T) {
	p := ProfileFor(v(4, 3, 6))
	caps := p.Capabilities()
	tr := reflect.ValueOf(p.Traits())
	if len(caps) != tr.NumField() {
		t.Fatalf("%d capabilities for %d traits", len(caps), tr.NumField())
	}
	for i, c := range caps {
		if name := tr.Type().Field(i).Name; c.Name != name || c.Value != tr.Field(i).Interface() {
			t.Errorf("capability %d: %s = %v, want trait %s = %v", i, c.Name, c.Value, name, tr.Field(i).Interface())
		}
	}
	var differ []string
	for i, c := range ProfileFor(v(4, 0, 5)).Capabilities() {
		if c != caps[i] {
			differ = append(differ, c.Name)
		}
	}
	if diff := cmp.Diff([]string{"NackUncounted", "ExportReadFastest", "NativeDelayedRetry"}, differ); diff != "" {
		t.Errorf("4.0.5 against 4.3.6 (-want +got):\n%s", diff)
	}
}
