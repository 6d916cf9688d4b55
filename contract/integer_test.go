package contract

import (
	"encoding/json"
	"math"
	"testing"
)

// TestInteger holds the integer readers to their documented semantics
// for each type a header or argument can arrive as: Integer (off the
// AMQP wire) reads no float, JSONInteger (through JSON) a whole one; they
// agree on everything else.
func TestInteger(t *testing.T) {
	tests := []struct {
		in     any
		want   int64
		wantOK bool
		json   bool // only JSONInteger reads it
	}{
		{int(-3), -3, true, false},
		{int8(math.MinInt8), math.MinInt8, true, false},
		{int16(math.MaxInt16), math.MaxInt16, true, false},
		{int32(math.MinInt32), math.MinInt32, true, false},
		{int64(math.MaxInt64), math.MaxInt64, true, false},
		{uint(7), 7, true, false},
		{uint8(math.MaxUint8), math.MaxUint8, true, false},
		{uint16(math.MaxUint16), math.MaxUint16, true, false},
		{uint32(math.MaxUint32), math.MaxUint32, true, false},
		{uint64(math.MaxInt64), math.MaxInt64, true, false},
		{uint64(math.MaxInt64 + 1), 0, false, false},
		{uint(math.MaxUint), 0, false, false},
		{float64(20), 20, true, true},
		{float64(-20), -20, true, true},
		{float64(0), 0, true, true},
		{math.Copysign(0, -1), 0, true, true},
		{2.5, 0, false, false},
		{-0.5, 0, false, false},
		{float64(1<<53 - 1), 1<<53 - 1, true, true},
		{float64(1 << 53), 0, false, false},
		{1e300, 0, false, false},
		{math.NaN(), 0, false, false},
		{math.Inf(1), 0, false, false},
		{math.Inf(-1), 0, false, false},
		{float32(16), 16, true, true},
		{float32(1.5), 0, false, false},
		{float32(math.Inf(1)), 0, false, false},
		{json.Number("42"), 42, true, true},
		{json.Number("42.0"), 42, true, true},
		{json.Number("42.5"), 0, false, false},
		{json.Number("1e3"), 1000, true, true},
		{json.Number("x"), 0, false, false},
		{"7", 0, false, false},
		{" 7 ", 0, false, false},
		{"", 0, false, false},
		{[]byte("7"), 0, false, false},
		{nil, 0, false, false},
		{true, 0, false, false},
		{[]any{int64(1)}, 0, false, false},
		{map[string]any{"count": int64(1)}, 0, false, false},
	}
	for _, tt := range tests {
		got, ok := JSONInteger(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("JSONInteger(%T %#v) = %d, %v; want %d, %v", tt.in, tt.in, got, ok, tt.want, tt.wantOK)
		}
		want, wantOK := tt.want, tt.wantOK
		if tt.json {
			want, wantOK = 0, false
		}
		if got, ok := Integer(tt.in); got != want || ok != wantOK {
			t.Errorf("Integer(%T %#v) = %d, %v; want %d, %v", tt.in, tt.in, got, ok, want, wantOK)
		}
	}
}
