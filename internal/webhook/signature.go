package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The header fields of Standard Webhooks.
const (
	// HeaderID carries the event's id: the same on every attempt, so that
	// a receiver can drop what it has processed already.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the attempt's time, in whole seconds since
	// the Unix epoch; receivers refuse one too far from their clock.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one "v1,<base64>" signature per signing
	// secret, separated by spaces: two during a rotation's overlap.
	HeaderSignature = "webhook-signature"
)

// Sign returns the webhook-signature value for an attempt: for each key,
// "v1," and the base64 of the HMAC-SHA256, under that key, of
// "<id>.<timestamp>.<body>".
func Sign(id string, at time.Time, body []byte, keys ...[]byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	sigs := make([]string, len(keys))
	for i, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	return strings.Join(sigs, " ")
}
