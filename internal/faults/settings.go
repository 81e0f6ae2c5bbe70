package faults

import "encoding/json"

// QueueSettings is the JSON of a queue's settings key,
// /config/queues/{name}. Zero fields are left out, so the
// node's defaults apply to them.
type QueueSettings struct {
	// Ack is "queued", "replicated" or "inserted" (ClickHouse queues
	// only).
	Ack string `json:"ack,omitempty"`
	// MaxBytes caps the bytes the queue holds; a put over it is
	// ResourceExhausted.
	MaxBytes   int64 `json:"max_bytes,omitempty"`
	BatchRows  int   `json:"batch_rows,omitempty"`
	BatchBytes int   `json:"batch_bytes,omitempty"`
	// BatchInterval, RetryMin, RetryMax and Visibility are Go durations,
	// such as "50ms".
	BatchInterval string `json:"batch_interval,omitempty"`
	RetryMin      string `json:"retry_min,omitempty"`
	RetryMax      string `json:"retry_max,omitempty"`
	Visibility    string `json:"visibility,omitempty"`
	Prefetch      int    `json:"prefetch,omitempty"`
}

// SettingsKey is the key of queue's settings.
func SettingsKey(queue string) string { return "/config/queues/" + queue }

// JSON is the settings as the value of their key.
func (s QueueSettings) JSON() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // strings and numbers always marshal
	}
	return string(b)
}
