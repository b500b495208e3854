"""The metering proxy: every model call of an agent attempt, forwarded, counted and priced."""
