package jobboard

import (
	"testing"
	"time"
)

func TestLoginPolicyDelay(t *testing.T) {
	t.Parallel()
	p := LoginPolicy{FreeAttempts: 3, BaseDelay: time.Second, MaxDelay: 10 * time.Second}
	for n, want := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		if got := p.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := p.Delay(1 << 30); got != p.MaxDelay {
		t.Errorf("Delay(huge) = %v, want the cap", got)
	}
}
