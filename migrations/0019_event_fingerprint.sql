-- A digest of what an API event said (src/ingress/fingerprint.ts), so a repeat of its event_id that says something
-- else is refused (409 event_id_conflict) instead of answered as a duplicate. Nullable and written only by the new
-- Worker: safe to apply before the deploy (the previous Worker neither reads nor writes it). Rows recorded before
-- have none, and a repeat of theirs is answered duplicate as before; platform events never have one.
ALTER TABLE `event_log` ADD `fingerprint` text;
