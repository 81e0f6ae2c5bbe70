// Package dispatch will own queues: the /q/ and /queue/ key grammar, dispatcher
// election with epochs, forwarding to the dispatcher, broadcast while it is
// unreachable, delivery to consumers, acknowledgements and batching into sinks.
//
// It holds no code yet; the queue issue fills it. kv calls it through a small
// interface that kv declares, so kv never imports dispatch.
package dispatch
