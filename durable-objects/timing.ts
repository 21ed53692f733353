/** An alarm handler gets 15 minutes of wall time; leave a margin. */
export const ALARM_BUDGET_MS = 14 * 60_000;
/** Watchdog margin past a run's deadline before its alarm declares the session lost. */
export const WATCHDOG_GRACE_MS = 5_000;

/**
 * When the watchdog alarm looks again while runs are active: at the earliest deadline (plus the grace), and at least
 * every `intervalMs`, so runs orphaned by an instance lost mid-run (a restart) end soon, not at a deadline minutes away.
 */
export const watchdogAt = (deadlines: number[], now: number, intervalMs: number) => Math.min(Math.min(...deadlines) + WATCHDOG_GRACE_MS, now + intervalMs);
