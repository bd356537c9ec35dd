-- Delivery feedback from SES (docs/design.md, "Delivery feedback"): the
-- configuration set publishes every email's events (send, delivery,
-- bounce, complaint) through SNS to a queue that the feedback function
-- reads. SES delivers each event at least once, and possibly late.

-- Each SES event applied, by its own key (the event type, the SES message
-- id and the feedback id SES gives a bounce or complaint): a second copy
-- of an event finds its key here and changes nothing.
CREATE TABLE email_feedback_events (
    feedback_id    text        PRIMARY KEY,
    kind           text        NOT NULL,
    ses_message_id text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_feedback_events_received_idx ON email_feedback_events (received_at);

-- The project's own suppression list, keyed by the lower-cased address.
-- A hard bounce or a complaint puts the address here; the worker sends a
-- suppressed address no status email (outcome suppressed). A complaint
-- outranks a bounce (a later bounce leaves it a complaint). Following a
-- verification link sent to the address lifts a bounce, never a
-- complaint. SES's account-level suppression list still applies
-- underneath.
CREATE TABLE email_suppressions (
    email          text        PRIMARY KEY,
    reason         text        NOT NULL CHECK (reason IN ('bounce', 'complaint')),
    detail         text        NOT NULL DEFAULT '',
    ses_message_id text        NOT NULL,
    suppressed_at  timestamptz NOT NULL DEFAULT now()
);

-- Soft bounces (a full mailbox, a message too large): counted, never
-- suppressing.
CREATE TABLE email_soft_bounces (
    email          text        PRIMARY KEY,
    bounces        integer     NOT NULL,
    last_bounce_at timestamptz NOT NULL
);

-- The delivery state of each email SES accepted, by its SES message id,
-- with the event it emailed (the email's event_id tag): sent, then
-- delivered, bounced or complained. A state only moves up that order, so
-- events that arrive out of order (a delivery after a complaint) leave the
-- worst one. Kept apart from the worker's claim, which may be recorded
-- after SES has answered already.
CREATE TABLE email_deliveries (
    ses_message_id text        PRIMARY KEY,
    event_id       text,
    email          text        NOT NULL,
    state          text        NOT NULL CHECK (state IN ('sent', 'delivered', 'bounced', 'complained')),
    detail         text        NOT NULL DEFAULT '',
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_deliveries_event_idx ON email_deliveries (event_id);
CREATE INDEX email_deliveries_updated_idx ON email_deliveries (updated_at);
