package ops

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

// SweepConfigKeys are the settings a sweep's config file may hold, named
// like the flags of dlq sweep; the file may write max_deaths for
// max-deaths.
var SweepConfigKeys = []string{"pattern", "max-deaths", "to", "vhost", "window", "unmanaged-target"}

// ReadSweepConfig reads a sweep's config file, JSON or YAML: its settings
// by the names of SweepConfigKeys, each value as a flag would give it.
func ReadSweepConfig(data []byte) (map[string]string, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s", broker.OneLine(err.Error()))
	}
	values := map[string]string{}
	for k, v := range raw {
		name := strings.ReplaceAll(k, "_", "-")
		if !slices.Contains(SweepConfigKeys, name) {
			return nil, fmt.Errorf("unknown key %q (known: %s)", k, strings.Join(SweepConfigKeys, ", "))
		}
		switch v.(type) {
		case string, int, int64, float64, bool:
		default:
			return nil, fmt.Errorf("%q must be a string, a number or a boolean", k)
		}
		values[name] = fmt.Sprint(v)
	}
	return values, nil
}
