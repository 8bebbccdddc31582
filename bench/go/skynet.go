// skynet in Go: the reference the suite's skynet workload is held to (issue 8:
// "skynet at or below Go's time on the same machine"). Not part of the suite, which
// is Rust only; run it by hand next to it:
//
//	GOMAXPROCS=2 go run bench/go/skynet.go [-reps 10]
//
// A 10-ary tree of 1,111,111 goroutines: each leaf sends its number, each inner
// goroutine spawns its ten children, receives their sums on one unbuffered channel
// and sends the total. Prints each repetition's time and the median.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
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

func main() {
	reps := flag.Int("reps", 10, "timed repetitions")
	flag.Parse()
	const leaves = 1_000_000
	const want = int64(leaves) * (leaves - 1) / 2
	times := make([]time.Duration, 0, *reps)
	for r := 0; r < *reps; r++ {
		out := make(chan int64)
		start := time.Now()
		go skynet(out, 0, leaves, 10)
		sum := <-out
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
