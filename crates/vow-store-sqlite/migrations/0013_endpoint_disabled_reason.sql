-- Why vow disabled an endpoint (dead letters in a row, or a 410 Gone), while it stays disabled;
-- NULL when it is enabled or an operator disabled it. The console shows it.
ALTER TABLE endpoints ADD COLUMN disabled_reason TEXT;
