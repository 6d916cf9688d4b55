package contract

import (
	"encoding/json"
	"math"
)

// Integer reads an AMQP integer: a header's or an argument's value, as a
// client library gives it off the wire. It is the one reader of such
// integers in rmqtopo; JSONInteger extends it to values that came through
// JSON.
//
//   - Every Go integer type is its value: amqp091-go gives int8, int16,
//     int32, int64, uint8, uint16 and uint32 (AMQP 0-9-1's b, s, I, l, B,
//     u, i), go-amqp also uint64, a caller's own table int or uint. An
//     unsigned value above math.MaxInt64 is not read (false).
//   - A float32 or float64 is not an integer, even a whole one (false):
//     AMQP types its values, and RabbitMQ itself takes none as an integer
//     (rabbit_amqqueue's check_int_arg accepts byte, short, signedint,
//     long, unsignedbyte, unsignedshort and unsignedint, never float or
//     double). A client that sends 2.0 where the contract says integer
//     sent something else.
//   - Anything else is not an integer (false): nil, a bool, an
//     amqp091-go Decimal, a table, and a string or []byte even when it
//     spells a number. The contract writes some counters as decimal
//     strings (HeaderAttempt, HeaderReplayCount); their readers parse the
//     string themselves (ParseAttempt) and use Integer for the rest.
//
// Integer only reads: range checks (an attempt from 1 to MaxAttempt, a
// count not below 0) are the caller's.
func Integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return unsigned(uint64(x))
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return unsigned(x)
	}
	return 0, false
}

// JSONInteger reads an integer that may have come through JSON, which
// has no integer type: a queue's arguments or a policy's definition as
// the management API or a definitions file gives them (Go's decoder
// gives 20 as float64 20, or json.Number "20" with UseNumber). It is
// Integer, and also
//
//   - a float32 or float64 that holds a whole number of magnitude below
//     2^53 (where a float64 still tells every integer from its
//     neighbours: 2^53+1 reads as 2^53); a fraction (2.5), NaN, an
//     infinity or a larger magnitude is not an integer (false);
//   - a json.Number that spells such a number ("20", "20.0", "2e1").
func JSONInteger(v any) (int64, bool) {
	switch x := v.(type) {
	case float32:
		return whole(float64(x))
	case float64:
		return whole(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, true
		}
		f, err := x.Float64()
		if err != nil {
			return 0, false
		}
		return whole(f)
	}
	return Integer(v)
}

func unsigned(x uint64) (int64, bool) {
	if x > math.MaxInt64 {
		return 0, false
	}
	return int64(x), true
}

// maxExact bounds the magnitudes at which a float64 tells every integer
// from its neighbours.
const maxExact = 1 << 53

func whole(f float64) (int64, bool) {
	if f != math.Trunc(f) || math.Abs(f) >= maxExact { // NaN fails the first, ±Inf the second
		return 0, false
	}
	return int64(f), true
}
