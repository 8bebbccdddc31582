// Ping-pong in Go, the suite's Go peer of `ping_pong` (see BENCHMARKS.md, "The
// workloads"). The suite builds it and runs
//
//	GOMAXPROCS=2 ping_pong -suite ROUNDS
//
// A ping goroutine starts its pong goroutine and sends it 0, 1, ..., ROUNDS-1 one
// at a time over an unbuffered channel; pong answers each n with n+1 on another,
// ping adds up the answers, closes pong's channel (which ends pong) and sends the
// sum. One untimed run, then one timed run; prints the suite's peer-result line.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func ping(rounds int, result chan<- uint64) {
	toPong := make(chan uint32)
	toPing := make(chan uint32)
	go pong(toPong, toPing)
	var sum uint64
	for i := 0; i < rounds; i++ {
		toPong <- uint32(i)
		sum += uint64(<-toPing)
	}
	close(toPong)
	result <- sum
}

func pong(in <-chan uint32, out chan<- uint32) {
	for n := range in {
		out <- n + 1
	}
}

func main() {
	flag.Bool("suite", true, "the suite's mode: -suite ROUNDS")
	flag.Parse()
	rounds := arg(0)
	measure(func() uint64 {
		result := make(chan uint64)
		go ping(rounds, result)
		return <-result
	})
}

// measure runs work once untimed, then once timed, and prints the suite's
// peer-result line: both results, the wall time and the process's CPU time (all
// threads, getrusage) of the timed run.
func measure(work func() uint64) {
	warmup := work()
	cpu0 := cpuSecs()
	start := time.Now()
	result := work()
	wall := time.Since(start)
	cpu := cpuSecs() - cpu0
	fmt.Printf("peer-result warmup=%d result=%d wall_secs=%.9f cpu_secs=%.6f\n",
		warmup, result, wall.Seconds(), cpu)
}

func cpuSecs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// arg is the i-th command-line argument after -suite, as a number.
func arg(i int) int {
	n, err := strconv.Atoi(flag.Arg(i))
	if err != nil {
		fmt.Fprintf(os.Stderr, "argument %d: %v\n", i, err)
		os.Exit(2)
	}
	return n
}
