package jobboard

import (
	"context"
	"time"
)

// AccountMail reports whether events of type typ send account mail (an
// address's verification link, a password reset link): mail a person waits
// for at a screen, which goes ahead of status mail, through a queue of its
// own and first to the send slots.
func AccountMail(typ string) bool {
	return typ == EventTypeEmailVerificationRequested || typ == EventTypePasswordResetRequested
}

// SlotRequest asks the send schedule for a slot.
type SlotRequest struct {
	// Interval is the time between two sends at the mail service's rate:
	// 1 / its maximum send rate.
	Interval time.Duration
	// Horizon is how far ahead a slot may be taken: a slot further away is
	// not taken, and the sender comes back later.
	Horizon time.Duration
	// Account: the slot is for account mail (see AccountMail), which goes
	// ahead of the status mail's slots already handed out.
	Account bool
}

// SendSlot is what the schedule answered: a slot taken, Wait from now; or,
// when not Taken, how long until the first free slot.
type SendSlot struct {
	Taken bool
	Wait  time.Duration
}

// SendSchedule hands out the send slots of the mail service's rate, one
// interval apart, shared by every worker instance.
type SendSchedule interface {
	// TakeSendSlot takes the first free slot if it is within r.Horizon.
	// Errors: database errors.
	TakeSendSlot(ctx context.Context, r SlotRequest) (SendSlot, error)
}

// SendRate tells the mail service's maximum send rate, in emails per
// second.
type SendRate interface {
	// MaxSendRate returns the rate. Errors: the mail service did not tell.
	MaxSendRate(ctx context.Context) (float64, error)
}
