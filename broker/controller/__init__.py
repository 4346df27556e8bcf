"""The elected controller: partition assignment, leader election and (later) ISR changes."""
