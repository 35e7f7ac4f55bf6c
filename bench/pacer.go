package bench

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// An open loop must start each call at its intended time, since its latency
// counts from then. Go's timers cannot be trusted with that below a
// millisecond: when every goroutine waits, the runtime sleeps in epoll_wait,
// whose timeout is in whole milliseconds, so a 60 us wait often lasts a
// millisecond. At 15k calls/s, with calls 65 us apart, that lateness was most
// of the p99 the harness measured (BenchmarkPacerLateness: a p99 of about
// 1.3 ms for calls that take 20 us). pace waits on a timerfd instead: the
// kernel's high-resolution timer makes the fd readable on time, and the
// runtime's poller wakes the reader, which holds no thread or P meanwhile (a
// nanosleep would hold one of the client's two Ps for every wait).

// pace sends slot numbers 0, 1, 2, ... on the returned channel, slot i at
// start + i/rate (or as soon after as a receiver takes it), until the slot
// whose time is not before end or until ctx ends; then it closes the
// channel. buf is the channel's buffer: slots that no receiver was free to
// take wait there, late, and their lateness is the open loop's to count.
func pace(ctx context.Context, start, end time.Time, rate float64, buf int) <-chan int64 {
	slots := make(chan int64, buf)
	wait := timerfdWait()
	go func() {
		defer close(slots)
		defer wait(-1)
		for i := int64(0); ctx.Err() == nil; i++ {
			at := slotTime(start, rate, i)
			if !at.Before(end) {
				return
			}
			for d := time.Until(at); d > 0; d = time.Until(at) {
				wait(d)
			}
			select {
			case slots <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return slots
}

// timerfdWait returns a function that waits for d on a timerfd (d < 0 closes
// it), or with time.Sleep where no timerfd can be made.
func timerfdWait() func(d time.Duration) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return func(d time.Duration) { time.Sleep(max(d, 0)) }
	}
	f := os.NewFile(uintptr(fd), "pacer timerfd") // non-blocking: reads park in the poller
	var expirations [8]byte
	return func(d time.Duration) {
		if d < 0 {
			f.Close()
			return
		}
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
			time.Sleep(d)
			return
		}
		if _, err := f.Read(expirations[:]); err != nil {
			time.Sleep(d) // a timerfd the poller does not take: never spin
		}
	}
}

// slotTime is the intended time of slot i of an open loop at rate calls/s.
func slotTime(start time.Time, rate float64, i int64) time.Time {
	return start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
}
