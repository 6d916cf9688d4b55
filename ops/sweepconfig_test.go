package ops

import (
	"maps"
	"testing"
)

func TestReadSweepConfig(t *testing.T) {
	got, err := ReadSweepConfig([]byte("pattern: '*.dlq'\nmax_deaths: 3\nunmanaged-target: true\n"))
	want := map[string]string{"pattern": "*.dlq", "max-deaths": "3", "unmanaged-target": "true"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for data, want := range map[string]string{
		`{"pattern": "a", "colour": "red"}`: `unknown key "colour" (known: pattern, max-deaths, to, vhost, window, unmanaged-target)`,
		"to: [a, b]\n":                      `"to" must be a string, a number or a boolean`,
	} {
		if _, err := ReadSweepConfig([]byte(data)); err == nil || err.Error() != want {
			t.Errorf("%q: err %v, want %q", data, err, want)
		}
	}
}
