package rabbitmq

import "testing"

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"3.10.8": {3, 10, 8}, "4.0.5": {4, 0, 5}, "4.3": {4, 3, 0},
		"3.8.0+rc.1.5.g9148053": {3, 8, 0}, "3.8.6.gad0c0bd": {3, 8, 6}, "3.7.0-alpha.381": {3, 7, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "4", "four.0", "0.0.0"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
	if v := (Version{4, 0, 1}); !v.AtLeast(4, 0) || v.AtLeast(4, 3) || !v.AtLeast(3, 13) {
		t.Errorf("AtLeast wrong for %v", v)
	}
}
