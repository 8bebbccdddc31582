// The ring in Go, the suite's Go peer of `ring` (see BENCHMARKS.md, "The
// workloads"). The suite builds it and runs
//
//	GOMAXPROCS=2 ring -suite NODES LAPS
//
// NODES goroutines, each owning an unbuffered channel and holding its successor's;
// the token 0 goes to the first, each forwards token+1, LAPS times (the first
// receives it once more and keeps it), then sends its last token on a results
// channel, which the main goroutine adds up. The channels are made in the timed
// window, as the other sides make their processes there. One untimed run, then
// one timed run; prints the suite's peer-result line.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func node(inbox <-chan uint64, next chan<- uint64, laps int, first bool, results chan<- uint64) {
	receives := laps
	if first {
		receives = laps + 1
	}
	var last uint64
	for lap := 1; lap <= receives; lap++ {
		last = <-inbox
		if !(first && lap == receives) {
			next <- last + 1
		}
	}
	results <- last
}

func run(nodes, laps int) uint64 {
	inboxes := make([]chan uint64, nodes)
	for i := range inboxes {
		inboxes[i] = make(chan uint64)
	}
	results := make(chan uint64, nodes)
	for i := 0; i < nodes; i++ {
		go node(inboxes[i], inboxes[(i+1)%nodes], laps, i == 0, results)
	}
	inboxes[0] <- 0
	var sum uint64
	for i := 0; i < nodes; i++ {
		sum += <-results
	}
	return sum
}

func main() {
	flag.Bool("suite", true, "the suite's mode: -suite NODES LAPS")
	flag.Parse()
	nodes, laps := arg(0), arg(1)
	measure(func() uint64 { return run(nodes, laps) })
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
