-- Reserved for the email order's migration (branch i18order), which takes
-- number 009; this placeholder keeps tern's sequence whole on this branch
-- and is replaced by that migration when the two are merged.
SELECT 1;
