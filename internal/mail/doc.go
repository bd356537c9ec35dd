// Package mail sends the candidate's status emails through Amazon SES v2.
//
// Sender implements jobboard.Mailer. Each email has a plain-text and an HTML
// part rendered from the embedded templates (templates/*.txt and *.html,
// plain text with {{.Field}} placeholders; names are escaped in HTML), one
// pair per new status plus a generic fallback. SES errors are
// sorted into jobboard.ErrMailThrottled, ErrMailPaused, ErrMailRejected,
// ErrMailRefused (not authorised to send) and retryable (see classify).
package mail
