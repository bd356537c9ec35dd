-- Issue 30: the worker sends at the mail service's rate, shared by every
-- worker instance (docs/design.md, "Pacing").
--
-- One row: the schedule of the account's sends. next_at is the first slot
-- not yet handed out; each send takes one and moves it one interval
-- (1 / the account's MaxSendRate) on, so the slots handed out to every
-- worker together are never closer than the rate allows. account_at is
-- the same for account mail (verification and password reset), which
-- takes the first free slot of its own, from now on, and moves next_at on
-- too: it goes ahead of the status mail's slots already handed out, whose
-- sends come later by one interval each time.
CREATE TABLE send_schedule (
    id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
    next_at    timestamptz NOT NULL DEFAULT '-infinity',
    account_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO send_schedule DEFAULT VALUES;
