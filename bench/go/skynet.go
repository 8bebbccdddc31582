// skynet in Go: the reference the suite's skynet workload is held to (issue 8:
// "skynet at or below Go's time on the same machine"), and the suite's Go peer of
// `skynet`. By hand:
//
//	GOMAXPROCS=2 go run bench/go/skynet.go [-reps 10]
//
// prints each repetition's time and the median; the suite builds it and runs
// `skynet -suite LEAVES` (one untimed run, one timed, the peer-result line).
//
// A 10-ary tree of 1,111,111 goroutines: each leaf sends its number, each inner
// goroutine spawns its ten children, receives their sums on one unbuffered channel
// and sends the total.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"time"
)

func skynet(out chan<- int64, num, size, div int64) {
	if size == 1 {
		out <- num
		return
	}
	children := make(chan int64)
	for i := int64(0); i < div; i++ {
		go skynet(children, num+i*(size/div), size/div, div)
	}
	var sum int64
	for i := int64(0); i < div; i++ {
		sum += <-children
	}
	out <- sum
}

func run(leaves int64) int64 {
	out := make(chan int64)
	go skynet(out, 0, leaves, 10)
	return <-out
}

func main() {
	reps := flag.Int("reps", 10, "timed repetitions")
	suite := flag.Bool("suite", false, "the suite's mode: -suite LEAVES")
	flag.Parse()
	if *suite {
		leaves := int64(arg(0))
		measure(func() uint64 { return uint64(run(leaves)) })
		return
	}
	const leaves = 1_000_000
	const want = int64(leaves) * (leaves - 1) / 2
	times := make([]time.Duration, 0, *reps)
	for r := 0; r < *reps; r++ {
		start := time.Now()
		sum := run(leaves)
		elapsed := time.Since(start)
		if sum != want {
			fmt.Fprintf(os.Stderr, "wrong sum %d, want %d\n", sum, want)
			os.Exit(1)
		}
		times = append(times, elapsed)
		fmt.Printf("rep %d: %v\n", r, elapsed)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fmt.Printf("go skynet, GOMAXPROCS=%d, %s: median %v (min %v, max %v)\n",
		runtime.GOMAXPROCS(0), runtime.Version(), times[len(times)/2], times[0], times[len(times)-1])
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
