package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// recordLine is one worker log line about a record.
type recordLine struct {
	Instance   string // the process instance that wrote it, e.g. "worker-2#1"
	Seq        int    // its position in that instance's log
	Time       time.Time
	EventID    string
	Outcome    string
	LeaseToken string
	Message    string
	SESID      string // ses_message_id, when the line has one
}

// readRecordLines reads the record lines (those with an outcome) of the
// given worker instances' logs. Lines that are not JSON (a panic's stack,
// say) are skipped.
func readRecordLines(instances []*instance) ([]recordLine, error) {
	var out []recordLine
	for _, in := range instances {
		err := scanJSONLines(in.logPath, func(seq int, raw []byte) {
			var l struct {
				Time       time.Time `json:"time"`
				Msg        string    `json:"msg"`
				EventID    string    `json:"event_id"`
				Outcome    string    `json:"outcome"`
				LeaseToken string    `json:"lease_token"`
				SESID      string    `json:"ses_message_id"`
			}
			if json.Unmarshal(raw, &l) != nil || l.Outcome == "" {
				return
			}
			out = append(out, recordLine{Instance: in.id, Seq: seq, Time: l.Time, EventID: l.EventID,
				Outcome: l.Outcome, LeaseToken: l.LeaseToken, Message: l.Msg, SESID: l.SESID})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sweepsSince counts the sweeps (done or failed) the given sweeper
// instances logged after t.
func sweepsSince(instances []*instance, t time.Time) (int, error) {
	n := 0
	for _, in := range instances {
		err := scanJSONLines(in.logPath, func(_ int, raw []byte) {
			var l struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal(raw, &l) == nil && (l.Msg == "sweep done" || l.Msg == "sweep failed") && l.Time.After(t) {
				n++
			}
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

func scanJSONLines(path string, fn func(seq int, raw []byte)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for seq := 0; sc.Scan(); seq++ {
		if b := sc.Bytes(); len(b) > 0 && b[0] == '{' {
			fn(seq, b)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read log %s: %w", path, err)
	}
	return nil
}
