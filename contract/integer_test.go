package contract

import (
	"encoding/json"
	"math"
	"testing"
)

// TestInteger holds the one integer reader to its documented semantics
// for each type a header or argument can arrive as.
func TestInteger(t *testing.T) {
	tests := []struct {
		in     any
		want   int64
		wantOK bool
	}{
		{int(-3), -3, true},
		{int8(math.MinInt8), math.MinInt8, true},
		{int16(math.MaxInt16), math.MaxInt16, true},
		{int32(math.MinInt32), math.MinInt32, true},
		{int64(math.MaxInt64), math.MaxInt64, true},
		{uint(7), 7, true},
		{uint8(math.MaxUint8), math.MaxUint8, true},
		{uint16(math.MaxUint16), math.MaxUint16, true},
		{uint32(math.MaxUint32), math.MaxUint32, true},
		{uint64(math.MaxInt64), math.MaxInt64, true},
		{uint64(math.MaxInt64 + 1), 0, false},
		{uint(math.MaxUint), 0, false},
		{float64(20), 20, true},
		{float64(-20), -20, true},
		{float64(0), 0, true},
		{math.Copysign(0, -1), 0, true},
		{2.5, 0, false},
		{-0.5, 0, false},
		{float64(1<<53 - 1), 1<<53 - 1, true},
		{float64(1 << 53), 0, false},
		{1e300, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
		{float32(16), 16, true},
		{float32(1.5), 0, false},
		{float32(math.Inf(1)), 0, false},
		{json.Number("42"), 42, true},
		{json.Number("42.0"), 42, true},
		{json.Number("42.5"), 0, false},
		{json.Number("1e3"), 1000, true},
		{json.Number("x"), 0, false},
		{"7", 0, false},
		{" 7 ", 0, false},
		{"", 0, false},
		{[]byte("7"), 0, false},
		{nil, 0, false},
		{true, 0, false},
		{[]any{int64(1)}, 0, false},
		{map[string]any{"count": int64(1)}, 0, false},
	}
	for _, tt := range tests {
		got, ok := Integer(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Integer(%T %#v) = %d, %v; want %d, %v", tt.in, tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}
