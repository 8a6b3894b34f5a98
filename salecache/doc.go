// Package salecache holds what an instance knows of its sales without the
// database.
//
// It is what each flashline instance knows about its sales
// without asking the database: whether each is scheduled, open, paused,
// closed or sold out, its waiting room's rules and counters. One cache
// serves the purchase path, whose 99% "no" (sold out, not open) is decided
// from its facts with no database round trip (flashline.Refusals, which
// reads it as a flashline.Memory; Cache.Wrap asks the same decider before
// a reservation reaches the database), the Redis gate (which
// sales it counts), and the waiting room, which answers every status poll
// from it (package waitroom). What it keeps of a sale is a
// flashline.SaleFacts, read from a flashline.FactSource.
//
// The database stays the authority. It tells every instance when a sale
// changes (a flashline.FactSource's Listen: a bucket runs out or gets stock back, a state
// or opening time changes, a room's watermark moves), and the cache re-reads
// that sale; it re-reads every sale once a second in case a notification was
// missed. A stale "available" costs one round trip (the conditional UPDATE
// then says sold out); a stale "sold out" lasts until the notification or
// the next refresh; and an entry not refreshed for StaleAfter (the database
// unreachable) is not trusted: the purchase path asks the database, and so
// fails closed, and the room reads it again before answering.
//
// A sale that is sold out, paused or closed still sends to the database the
// requests of customers who ever held a reservation in it: their retry must
// replay the stored answer (or say "limit reached"), which only the database
// knows. And a refusal from memory waits for a read of the sale's stock
// version made after it arrived (confirm.go): memory may not yet know of a
// unit that came back and was taken by the very customer now retrying. One
// read serves every refusal waiting for it, in every sale.
package salecache
