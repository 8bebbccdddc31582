#!/usr/bin/env escript
%% The Erlang peer of the suite's `cluster_rtt` and `cluster_throughput` cases
%% (bench/benches/suite/cluster.rs): two distributed Erlang nodes on loopback,
%% a process on each, talking over Erlang distribution.
%%
%%   escript bench/erlang/dist_pingpong.erl SCHEDULERS
%%
%% Starts this node distributed (`wsched_bench_a_<os pid>@127.0.0.1`, epmd started
%% if it is not running, distribution bound to 127.0.0.1) and a second node with
%% `peer:start_link` (OTP 25+) on loopback, both with SCHEDULERS schedulers, and
%% loads this module into it. Then it reads commands on stdin, one a line, and
%% answers each with one line on stdout (start-up is never timed):
%%
%%   rtt N   -> "rtt ok n=N p50_ns=P50 p99_ns=P99 wall_ns=W"
%%              N sequential round trips: a process here sends {ping, self(), I}
%%              to a fresh process on the peer, which answers {pong, I}; each
%%              round trip timed with erlang:monotonic_time(nanosecond);
%%              percentiles by nearest rank over the N.
%%   tput M  -> "tput ok n=M wall_ns=W"
%%              a process here sends the integers 0..M-1 to a fresh process on the
%%              peer, which checks each is the next one and answers {done, M} after
%%              the last; timed from the first send to the answer.
%%   quit    -> stops the peer and exits (as does the end of stdin).
%%
%% A wrong answer prints "rtt error ..." / "tput error ...". The first line out is
%% "ready otp=R schedulers=S peer=NODE".
-module(dist_pingpong).
-export([main/1, ponger/0, counter/2]).
-mode(compile).

-define(TIMEOUT, 120000).

main(Args) ->
    Schedulers = case Args of
                     [Arg | _] -> list_to_integer(Arg);
                     [] -> erlang:system_info(schedulers_online)
                 end,
    _ = os:cmd("epmd -daemon"),
    ok = application:set_env(kernel, inet_dist_use_interface, {127, 0, 0, 1}),
    Suffix = os:getpid(),
    Me = list_to_atom("wsched_bench_a_" ++ Suffix ++ "@127.0.0.1"),
    {ok, _} = start_distribution(Me, 50),
    erlang:set_cookie(node(), wsched_bench),
    _ = erlang:system_flag(schedulers_online, min(Schedulers, erlang:system_info(schedulers))),
    S = integer_to_list(Schedulers),
    {ok, Peer, Node} = peer:start_link(#{
        name => list_to_atom("wsched_bench_b_" ++ Suffix),
        host => "127.0.0.1",
        longnames => true,
        args => ["-setcookie", "wsched_bench",
                 "-kernel", "inet_dist_use_interface", "{127,0,0,1}",
                 "+S", S ++ ":" ++ S]
    }),
    {ok, Beam} = own_beam(),
    {module, ?MODULE} = erpc:call(Node, code, load_binary, [?MODULE, "dist_pingpong.erl", Beam]),
    say("ready otp=~s schedulers=~b peer=~s",
        [erlang:system_info(otp_release), erlang:system_info(schedulers_online), Node]),
    loop(Node),
    peer:stop(Peer).

%% epmd may take a moment to come up after `epmd -daemon`.
start_distribution(Me, Tries) ->
    case net_kernel:start([Me, longnames]) of
        {ok, _} = Ok -> Ok;
        {error, _} when Tries > 0 ->
            timer:sleep(100),
            start_distribution(Me, Tries - 1);
        Error -> Error
    end.

say(Format, Args) ->
    io:put_chars(io_lib:format(Format, Args) ++ "\n").

loop(Node) ->
    case io:get_line("") of
        eof -> ok;
        {error, _} -> ok;
        Line ->
            case string:lexemes(string:trim(Line), " ") of
                ["rtt", N] -> rtt(Node, list_to_integer(N)), loop(Node);
                ["tput", M] -> tput(Node, list_to_integer(M)), loop(Node);
                ["quit"] -> ok;
                Other -> say("error unknown command ~p", [Other]), loop(Node)
            end
    end.

%% This module's code, compiled from this file, for the peer.
own_beam() ->
    {ok, Sections} = escript:extract(escript:script_name(), [compile_source]),
    {source, Beam} = lists:keyfind(source, 1, Sections),
    {ok, Beam}.

%% ------------------------------------------------------------------ round trips

rtt(Node, N) ->
    Parent = self(),
    {Pinger, Ref} = spawn_monitor(fun() -> Parent ! {self(), pinger(Node, N)} end),
    receive
        {Pinger, {ok, Latencies, Wall}} ->
            Sorted = lists:sort(Latencies),
            case length(Sorted) of
                N -> say("rtt ok n=~b p50_ns=~b p99_ns=~b wall_ns=~b",
                         [N, rank(Sorted, 50), rank(Sorted, 99), Wall]);
                Got -> say("rtt error ~b round trips, expected ~b", [Got, N])
            end;
        {Pinger, {error, Why}} -> say("rtt error ~p", [Why]);
        {'DOWN', Ref, process, Pinger, Why} -> say("rtt error pinger died: ~p", [Why])
    after ?TIMEOUT -> say("rtt error timeout", [])
    end,
    erlang:demonitor(Ref, [flush]).

pinger(Node, N) ->
    Pong = spawn(Node, ?MODULE, ponger, []),
    Start = erlang:monotonic_time(nanosecond),
    Result = pings(Pong, 0, N, []),
    Wall = erlang:monotonic_time(nanosecond) - Start,
    Pong ! stop,
    case Result of
        {ok, Latencies} -> {ok, Latencies, Wall};
        Error -> Error
    end.

pings(_Pong, N, N, Acc) -> {ok, Acc};
pings(Pong, I, N, Acc) ->
    T0 = erlang:monotonic_time(nanosecond),
    Pong ! {ping, self(), I},
    receive
        {pong, I} ->
            T1 = erlang:monotonic_time(nanosecond),
            pings(Pong, I + 1, N, [T1 - T0 | Acc]);
        {pong, Other} -> {error, {wrong_pong, Other, I}}
    after ?TIMEOUT -> {error, {no_pong, I}}
    end.

ponger() ->
    receive
        {ping, From, I} -> From ! {pong, I}, ponger();
        stop -> ok
    end.

%% Nearest rank, as the suite's `percentile`.
rank(Sorted, P) ->
    Len = length(Sorted),
    R = max(1, min(Len, ceil(P / 100 * Len))),
    lists:nth(R, Sorted).

%% ------------------------------------------------------------------ throughput

tput(Node, M) ->
    Parent = self(),
    {Sender, Ref} = spawn_monitor(fun() -> Parent ! {self(), sender(Node, M)} end),
    receive
        {Sender, {ok, M, Wall}} -> say("tput ok n=~b wall_ns=~b", [M, Wall]);
        {Sender, {ok, Got, _}} -> say("tput error counted ~b, expected ~b", [Got, M]);
        {Sender, {error, Why}} -> say("tput error ~p", [Why]);
        {'DOWN', Ref, process, Sender, Why} -> say("tput error sender died: ~p", [Why])
    after ?TIMEOUT -> say("tput error timeout", [])
    end,
    erlang:demonitor(Ref, [flush]).

sender(Node, M) ->
    Counter = spawn(Node, ?MODULE, counter, [self(), M]),
    Start = erlang:monotonic_time(nanosecond),
    send_all(Counter, 0, M),
    receive
        {done, Count} -> {ok, Count, erlang:monotonic_time(nanosecond) - Start};
        {out_of_order, Got, Expected} -> {error, {out_of_order, Got, Expected}}
    after ?TIMEOUT -> {error, no_answer}
    end.

send_all(_Counter, M, M) -> ok;
send_all(Counter, I, M) ->
    Counter ! I,
    send_all(Counter, I + 1, M).

counter(ReportTo, M) -> count(ReportTo, 0, M).

count(ReportTo, M, M) -> ReportTo ! {done, M};
count(ReportTo, Expected, M) ->
    receive
        Expected -> count(ReportTo, Expected + 1, M);
        Other when is_integer(Other) -> ReportTo ! {out_of_order, Other, Expected}
    end.
