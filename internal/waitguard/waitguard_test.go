package waitguard

import (
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	cases := []struct {
		scale string
		quiet time.Duration
		want  time.Duration
	}{
		{"", time.Second, Floor},                  // 10 s is under the floor
		{"", 10 * time.Second, 100 * time.Second}, // Factor times
		{"2", 10 * time.Second, 200 * time.Second},
		{"0.5", time.Millisecond, Floor / 2},
		{"nonsense", 10 * time.Second, 100 * time.Second},
		{"-3", 10 * time.Second, 100 * time.Second},
	}
	for _, c := range cases {
		t.Setenv(ScaleEnv, c.scale)
		if got := For(c.quiet); got != c.want {
			t.Errorf("%s=%q: For(%v) = %v, want %v", ScaleEnv, c.scale, c.quiet, got, c.want)
		}
	}
}
