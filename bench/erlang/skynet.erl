#!/usr/bin/env escript
%%! +P 2097152
%% skynet in Erlang, the suite's `skynet` peer (see BENCHMARKS.md, "The workloads").
%%
%%     ERL_FLAGS="+S 2:2" escript bench/erlang/skynet.erl [LEAVES]
%%
%% A 10-ary tree of processes: each leaf sends its number to its parent, each inner
%% process spawns its ten children and sends the sum of the ten numbers it receives.
%% One untimed run (the fresh VM's heaps grow there), then one timed run of the work
%% alone; prints the suite's `peer-result` line. `+P` (above) raises the VM's process
%% limit (262,144 by default) above the tree's 1,111,111 processes.
-mode(compile).

main(Args) ->
    Leaves = case Args of [N] -> list_to_integer(N); [] -> 1000000 end,
    measure(fun() -> run(Leaves) end).

%% Runs Work once untimed, then once timed; prints both results, the wall time and
%% the VM's CPU time (all its threads, to the millisecond) of the timed run.
measure(Work) ->
    Warmup = Work(),
    {Cpu0, _} = statistics(runtime),
    T0 = erlang:monotonic_time(nanosecond),
    Result = Work(),
    T1 = erlang:monotonic_time(nanosecond),
    {Cpu1, _} = statistics(runtime),
    io:format("peer-result warmup=~b result=~b wall_secs=~.9f cpu_secs=~.3f~n",
              [Warmup, Result, (T1 - T0) / 1.0e9, (Cpu1 - Cpu0) / 1000]).

run(Leaves) ->
    Me = self(),
    spawn(fun() -> skynet(Me, 0, Leaves) end),
    receive Sum -> Sum end.

skynet(Parent, Num, 1) ->
    Parent ! Num;
skynet(Parent, Num, Size) ->
    Child = Size div 10,
    Me = self(),
    [spawn(fun() -> skynet(Me, Num + I * Child, Child) end) || I <- lists:seq(0, 9)],
    Parent ! collect(10, 0).

collect(0, Sum) -> Sum;
collect(Left, Sum) ->
    receive N -> collect(Left - 1, Sum + N) end.
