package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a RabbitMQ release, as /api/overview's rabbitmq_version or a
// definitions export's rabbit_version gives it ("3.13.7", "4.0.5",
// "3.8.0+rc.1.5.g9148053"). The zero Version means unknown.
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion reads "MAJOR.MINOR[.PATCH]" with anything after the
// numbers (a pre-release or build suffix) ignored.
func ParseVersion(s string) (Version, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(t, "v")
	if i := strings.IndexAny(t, "+-~ "); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("rabbitmq version %q: want MAJOR.MINOR[.PATCH], e.g. 4.0.5", s)
	}
	var n [3]int
	for i := 0; i < len(parts) && i < 3; i++ {
		v, err := strconv.Atoi(parts[i])
		if err != nil || v < 0 {
			if i == 2 {
				break // "3.8.6.gad0c0bd": a build, not a patch number
			}
			return Version{}, fmt.Errorf("rabbitmq version %q: want MAJOR.MINOR[.PATCH], e.g. 4.0.5", s)
		}
		n[i] = v
	}
	if n[0] == 0 {
		return Version{}, fmt.Errorf("rabbitmq version %q: no such release", s)
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// Known reports whether the version was read.
func (v Version) Known() bool { return v.Major > 0 }

// AtLeast reports whether v is major.minor or later; an unknown version is
// never at least anything.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v Version) String() string {
	if !v.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// Less reports whether v is an earlier release than w, patch included.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// Series is the release series, MAJOR.MINOR: "4.3" for 4.3.6.
func (v Version) Series() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }
