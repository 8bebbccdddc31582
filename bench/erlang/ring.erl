#!/usr/bin/env escript
%% The ring in Erlang, the suite's `ring` peer (see BENCHMARKS.md, "The workloads").
%%
%%     ERL_FLAGS="+S 2:2" escript bench/erlang/ring.erl [NODES LAPS]
%%
%% The main process spawns NODES processes, sends each its successor's pid, then
%% the token 0 to the first; each node forwards token + 1 to its successor, LAPS
%% times (the first node receives the token once more and keeps it), then sends
%% its last token to the main process, which adds them up.
%% One untimed run, then one timed run of the work alone; prints the suite's
%% `peer-result` line.
-mode(compile).

main(Args) ->
    {Nodes, Laps} = case Args of
        [N, L] -> {list_to_integer(N), list_to_integer(L)};
        [] -> {1000, 100}
    end,
    measure(fun() -> run(Nodes, Laps) end).

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

run(Nodes, Laps) ->
    Main = self(),
    Pids = [spawn(fun() -> node(Main, Laps, I =:= 0) end) || I <- lists:seq(0, Nodes - 1)],
    Successors = tl(Pids) ++ [hd(Pids)],
    lists:foreach(fun({Pid, Next}) -> Pid ! {next, Next} end, lists:zip(Pids, Successors)),
    hd(Pids) ! {token, 0},
    collect(Nodes, 0).

node(Main, Laps, First) ->
    Next = receive {next, Pid} -> Pid end,
    Receives = case First of true -> Laps + 1; false -> Laps end,
    Main ! {last, forward(Next, First, 1, Receives)}.

%% The first node keeps the token it receives last; every other receive is
%% forwarded plus one.
forward(Next, First, Lap, Receives) ->
    receive
        {token, T} when Lap =:= Receives, First -> T;
        {token, T} when Lap =:= Receives -> Next ! {token, T + 1}, T;
        {token, T} -> Next ! {token, T + 1}, forward(Next, First, Lap + 1, Receives)
    end.

collect(0, Sum) -> Sum;
collect(Left, Sum) ->
    receive {last, T} -> collect(Left - 1, Sum + T) end.
