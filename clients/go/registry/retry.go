package registry

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"syscall"
	"time"
)

const (
	// DefaultMinBackoff is RetryPolicy's wait before the first retry when MinBackoff is zero.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff is RetryPolicy's longest wait when MaxBackoff is zero.
	DefaultMaxBackoff = 2 * time.Second
)

// RetryPolicy says how often, and after which waits, a call that failed in a retryable way is tried
// again (WithRetry). The zero policy retries nothing.
//
// The wait before retry n (1 for the first) is MinBackoff·2^(n-1), at most MaxBackoff, of which a
// random part is taken: a wait between half of it and all of it (jitter, so that clients refused
// together do not come back together).
type RetryPolicy struct {
	// MaxAttempts is how many times a call is tried in all, the first time included: 3 means at
	// most two retries. 0 or 1: no retry.
	MaxAttempts int
	// MinBackoff is the wait before the first retry (DefaultMinBackoff when zero).
	MinBackoff time.Duration
	// MaxBackoff caps each wait (DefaultMaxBackoff when zero; at least MinBackoff).
	MaxBackoff time.Duration
}

// WithRetry makes Dial and every call retry, under the policy, the failures where sending the same
// request again is safe and may succeed:
//
//   - the daemon's retryable refusals, RegistryError.Retryable: SHUTTING_DOWN (on a new
//     connection, once the daemon is back), TOO_MANY_CONNECTIONS (on a new connection),
//     STORAGE_FULL and FLEET_UNAVAILABLE. The request was not carried out;
//   - failing to reach the daemon while it restarts: a dial that finds no socket (ENOENT), nothing
//     listening on it (ECONNREFUSED) or its listen queue full (EAGAIN); and a new connection that
//     ends before the request could be written on it (e.g. during its Hello). The request never
//     reached the daemon.
//
// Nothing else is retried: not a request written without a response before the connection closed
// (ErrConnectionClosed: the daemon may have carried it out), nor a refusal of another code (the
// same request gets the same answer), nor a permission error (EACCES), a protocol or version error,
// a context error. The call's context bounds the whole: no wait runs past its deadline or
// cancellation, and the call then returns the last attempt's error.
//
// Off by default: a call fails at its first error.
func WithRetry(policy RetryPolicy) Option { return func(o *options) { o.retry = policy } }

// retrier holds a client's retry policy and the random source of its jitter.
type retrier struct {
	policy RetryPolicy
	// sleep waits d or until ctx ends (then it returns false); tests replace it.
	sleep func(ctx context.Context, d time.Duration) bool

	mu     sync.Mutex
	random *rand.Rand
}

func newRetrier(policy RetryPolicy, sleep func(context.Context, time.Duration) bool) *retrier {
	if policy.MinBackoff <= 0 {
		policy.MinBackoff = DefaultMinBackoff
	}
	if policy.MaxBackoff <= 0 {
		policy.MaxBackoff = DefaultMaxBackoff
	}
	if policy.MaxBackoff < policy.MinBackoff {
		policy.MaxBackoff = policy.MinBackoff
	}
	if sleep == nil {
		sleep = sleepContext
	}
	return &retrier{policy: policy, sleep: sleep, random: rand.New(rand.NewSource(time.Now().UnixNano()))}
}

// again reports whether attempt (1 for the first) should be followed by another, after its wait:
// err is retryable, attempts remain, and the wait ends before ctx does. sent is whether the
// request may have reached the daemon.
func (r *retrier) again(ctx context.Context, attempt int, err error, sent bool) bool {
	if attempt >= r.policy.MaxAttempts || !retryable(err, sent) || ctx.Err() != nil {
		return false
	}
	wait := r.backoff(attempt)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
		return false
	}
	return r.sleep(ctx, wait)
}

// backoff is the wait after attempt n fails: a random duration in [ceiling/2, ceiling], where the
// ceiling is MinBackoff·2^(n-1), at most MaxBackoff.
func (r *retrier) backoff(attempt int) time.Duration {
	ceiling := r.policy.MinBackoff
	for i := 1; i < attempt && ceiling < r.policy.MaxBackoff; i++ {
		if ceiling > r.policy.MaxBackoff/2 {
			ceiling = r.policy.MaxBackoff
		} else {
			ceiling *= 2
		}
	}
	half := ceiling / 2
	r.mu.Lock()
	jitter := time.Duration(r.random.Int63n(int64(ceiling-half) + 1))
	r.mu.Unlock()
	return half + jitter
}

func sleepContext(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryable reports whether a failed attempt may be made again: a retryable refusal, or a failure
// to reach the daemon before the request was sent (see WithRetry).
func retryable(err error, sent bool) bool {
	if IsRetryable(err) {
		return true
	}
	var transportError *TransportError
	if sent || !errors.As(err, &transportError) {
		return false
	}
	if transportError.Op == "dial" {
		return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EAGAIN)
	}
	return errors.Is(err, ErrConnectionClosed)
}
