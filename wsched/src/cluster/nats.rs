//! The NATS transport (the `nats` feature): frames over core NATS subjects, the
//! key-value store in a JetStream bucket.
//!
//! * Frames to node `N` of cluster `C` go to the subject `wsched.C.node.N`,
//!   broadcasts to `wsched.C.all`. Core NATS keeps the order of one connection's
//!   messages on one subject and drops them when nobody listens, which is what the
//!   seam asks of a pipe.
//! * The store is the JetStream key-value bucket `wsched_C`, one value per key,
//!   on file storage (it survives a restart of a server run with `-js -sd DIR`).
//!   A revision is the bucket stream's sequence number, so it grows across keys.
//!
//! The transport runs on a runtime of its own — a current-thread tokio runtime
//! driven by one thread, `wsched-nats` — so that the scheduler's workers, which
//! call it, never wait on the network and never need to be inside tokio. A send
//! only pushes onto a queue; one publisher task drains it into the client, so the
//! frames to one destination leave in the order they were sent. One receiver task
//! hands what arrives to the sink, and the connection's losses and regains with it:
//! the sink is never called from two threads at once. Frames to a node come in
//! their sender's order, and so do broadcasts; a broadcast and a frame to the node
//! from one sender travel on two subjects, and may arrive in either order.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::Duration;

use async_nats::jetstream::kv::{Operation, Store, UpdateErrorKind};
use async_nats::jetstream::stream::{DiscardPolicy, StorageType};
use async_nats::{Client, ConnectOptions, Event, Message, RequestErrorKind, Subject, Subscriber};
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::transport::{
    Done, FrameSink, KeyValue, KvEntry, KvError, Revision, Transport, TransportError,
};

/// The name of the runtime's thread (and of its blocking threads, which resolve
/// host names).
const THREAD_NAME: &str = "wsched-nats";

/// Messages the client holds while it is not connected (its command buffer); the
/// frames past them wait in the transport's queue.
const CLIENT_BUFFER: usize = 2048;

/// Messages a subscription holds before the client drops them as a slow consumer's.
const SUBSCRIPTION_BUFFER: usize = 1 << 20;

/// How long [`Transport::close`] lets queued frames go out before it drops them.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the receiver task may take to unsubscribe at the close, and the
/// runtime's thread to stop after it.
const STOP_TIMEOUT: Duration = Duration::from_millis(500);

/// How to connect a [`NatsTransport`], for settings other than the defaults of
/// [`NatsTransport::connect`].
///
/// ```no_run
/// # use std::time::Duration;
/// use wsched::cluster::NatsOptions;
///
/// let transport = NatsOptions::new()
///     .connect_timeout(Duration::from_secs(2))
///     .max_queued(10_000)
///     .connect("nats://127.0.0.1:4222", "prod")?;
/// # Ok::<(), wsched::cluster::TransportError>(())
/// ```
#[derive(Clone, Debug)]
pub struct NatsOptions {
    connect_timeout: Duration,
    kv_timeout: Duration,
    max_queued: usize,
    max_reconnect_delay: Duration,
}

impl Default for NatsOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl NatsOptions {
    /// The defaults: a 5 s connect timeout, a 5 s timeout for key-value operations,
    /// at most 65,536 frames queued, reconnection attempts at most 1 s apart.
    pub fn new() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            kv_timeout: Duration::from_secs(5),
            max_queued: 1 << 20,
            max_reconnect_delay: Duration::from_secs(1),
        }
    }

    /// How long one attempt to reach the server may take, at the start and at each
    /// reconnection (default 5 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a key-value operation (and each JetStream request while
    /// connecting) waits for the server before it fails with
    /// [`KvError::Unavailable`] (default 5 s). An operation that timed out while the
    /// server was away may still be carried out when it is back: read the key again
    /// to know.
    #[must_use]
    pub fn kv_timeout(mut self, timeout: Duration) -> Self {
        self.kv_timeout = timeout;
        self
    }

    /// How many frames may wait to be handed to the client (default 1,048,576). They
    /// pile up while the server is away, once the client's own buffer of 2,048
    /// messages is full; past this bound new frames are dropped (and counted by
    /// [`NatsTransport::dropped`]), which the cluster layer sees as a gap.
    #[must_use]
    pub fn max_queued(mut self, frames: usize) -> Self {
        self.max_queued = frames;
        self
    }

    /// The longest wait between two attempts to reconnect (default 1 s). The waits
    /// start at nothing and double from 2 ms up to it.
    #[must_use]
    pub fn max_reconnect_delay(mut self, delay: Duration) -> Self {
        self.max_reconnect_delay = delay;
        self
    }

    /// Connects to the NATS server at `url` (such as `nats://127.0.0.1:4222`) for
    /// cluster `cluster`, and opens the cluster's key-value bucket, creating it if
    /// it is missing. Blocks until it is done or has failed.
    ///
    /// # Errors
    /// When `cluster` is not a valid name (ASCII letters, digits, `-` and `_`), the
    /// server cannot be reached, or JetStream is not enabled on it.
    pub fn connect(self, url: &str, cluster: &str) -> Result<NatsTransport, TransportError> {
        NatsTransport::start(self, url, cluster)
    }
}

/// The NATS transport: a [`Transport`] over a `nats-server` with JetStream.
///
/// Frames travel on core NATS subjects, the key-value store is a JetStream bucket
/// (see the module's documentation for the names). The transport runs on its own
/// thread (`wsched-nats`), which also runs the key-value callbacks and the sink;
/// its methods never block on the network, but [`connect`](Self::connect),
/// [`open`](Transport::open) and [`close`](Transport::close), which wait for the
/// server (each for a bounded time).
///
/// While the connection is lost the client reconnects on its own, and tells the
/// sink ([`FrameSink::connected`]). Frames sent meanwhile wait in the queue (up to
/// [`NatsOptions::max_queued`]); the ones that were on their way when the
/// connection broke are lost, as are those that reach the server before their
/// receiver has subscribed again.
pub struct NatsTransport {
    /// `wsched.<cluster>.`, the start of every subject.
    prefix: String,
    /// Each node's subject, made once: a send then allocates no subject.
    subjects: parking_lot::RwLock<std::collections::HashMap<String, Subject>>,
    driver: Driver,
    client: Client,
    kv: NatsKv,
    /// Frames for the publisher task.
    outbox: mpsc::UnboundedSender<Outgoing>,
    publisher: Mutex<Option<JoinHandle<()>>>,
    counts: Arc<Counts>,
    max_queued: usize,
    /// The connection's events, then the close, for the receiver task.
    control: mpsc::UnboundedSender<Control>,
    /// The other end of `control`, until `open` gives it to the receiver task.
    control_rx: Mutex<Option<mpsc::UnboundedReceiver<Control>>>,
    receiver: Mutex<Option<JoinHandle<()>>>,
    /// Set by the close: nothing is sent or started after it.
    closed: Arc<AtomicBool>,
}

/// Frames in and out of the publisher's queue.
#[derive(Default)]
struct Counts {
    queued: AtomicUsize,
    dropped: AtomicU64,
    /// Times the client reported a subscription too slow: messages to this node
    /// were dropped by the client, not handed to the sink.
    slow_consumer: AtomicU64,
}

enum Outgoing {
    Frame(Subject, Bytes),
    /// The close: the frames before it are the last.
    Stop,
}

enum Control {
    Connected(bool),
    Stop,
}

impl NatsTransport {
    /// Connects to the NATS server at `url` (such as `nats://127.0.0.1:4222`) for
    /// cluster `cluster`, with the default [`NatsOptions`]; see
    /// [`NatsOptions::connect`].
    ///
    /// # Errors
    /// When `cluster` is not a valid name (ASCII letters, digits, `-` and `_`), the
    /// server cannot be reached, or JetStream is not enabled on it.
    pub fn connect(url: &str, cluster: &str) -> Result<Self, TransportError> {
        NatsOptions::new().connect(url, cluster)
    }

    /// Frames that were never handed to the client: sent after the close, to a node
    /// whose name cannot be a subject, past [`NatsOptions::max_queued`], or refused
    /// by the client (larger than the server's payload limit).
    pub fn dropped(&self) -> u64 {
        self.counts.dropped.load(Ordering::Relaxed)
    }

    /// Times the client dropped messages for this node because its subscription's
    /// buffer was full (a slow consumer): the cluster sees them as lost frames.
    pub fn slow_consumer_events(&self) -> u64 {
        self.counts.slow_consumer.load(Ordering::Relaxed)
    }

    fn start(options: NatsOptions, url: &str, cluster: &str) -> Result<Self, TransportError> {
        check_cluster(cluster)?;
        let driver = Driver::start().map_err(|err| {
            TransportError::with_source("cannot start the NATS transport's thread", err)
        })?;
        let (control, control_rx) = mpsc::unbounded_channel();
        let bucket = format!("wsched_{cluster}");
        let counts = Arc::new(Counts::default());
        let connecting = {
            let (url, bucket, control) = (url.to_owned(), bucket.clone(), control.clone());
            let slow = counts.clone();
            let (options, name) = (options.clone(), format!("wsched cluster {cluster}"));
            async move {
                let max_delay = options.max_reconnect_delay;
                let client = ConnectOptions::new()
                    .name(name)
                    .client_capacity(CLIENT_BUFFER)
                    .connection_timeout(options.connect_timeout)
                    .reconnect_delay_callback(move |attempts| reconnect_delay(attempts, max_delay))
                    // A burst from a fast peer waits here rather than overflowing
                    // (an overflow loses frames: a gap, and the peer declared down).
                    .subscription_capacity(SUBSCRIPTION_BUFFER)
                    .event_callback(move |event| {
                        // Only the connection's state matters to the sink; the
                        // receiver task reports its changes.
                        let up = match event {
                            Event::Connected => Some(true),
                            Event::Disconnected => Some(false),
                            Event::SlowConsumer(_) => {
                                slow.slow_consumer.fetch_add(1, Ordering::Relaxed);
                                None
                            }
                            _ => None,
                        };
                        if let Some(up) = up {
                            let _ = control.send(Control::Connected(up));
                        }
                        std::future::ready(())
                    })
                    .connect(url.as_str())
                    .await
                    .map_err(|err| {
                        TransportError::with_source(
                            format!(
                                "cannot connect to NATS at {url} ({err}): is nats-server \
                                 running there? start it with `nats-server -js`"
                            ),
                            err,
                        )
                    })?;
                let mut jetstream = async_nats::jetstream::new(client.clone());
                jetstream.set_timeout(options.kv_timeout);
                let store = open_bucket(&jetstream, &bucket, &url).await?;
                Ok::<_, TransportError>((client, store))
            }
        };
        // The client bounds each step by its timeouts; this bound is only a guard.
        let guard = options.connect_timeout + 3 * options.kv_timeout + Duration::from_secs(1);
        let (client, store) = match driver.run(connecting, guard) {
            Some(result) => result?,
            None => {
                driver.stop();
                return Err(TransportError::new(format!(
                    "connecting to NATS at {url} took more than {guard:?}: is the server \
                     overloaded?"
                )));
            }
        };

        let (outbox, queue) = mpsc::unbounded_channel();
        let publisher = driver
            .handle
            .spawn(publish(client.clone(), queue, counts.clone()));
        let closed = Arc::new(AtomicBool::new(false));
        Ok(Self {
            prefix: format!("wsched.{cluster}."),
            subjects: Default::default(),
            kv: NatsKv {
                handle: driver.handle.clone(),
                store,
                bucket,
                timeout: options.kv_timeout,
                closed: closed.clone(),
            },
            driver,
            client,
            outbox,
            publisher: Mutex::new(Some(publisher)),
            counts,
            max_queued: options.max_queued,
            control,
            control_rx: Mutex::new(Some(control_rx)),
            receiver: Mutex::new(None),
            closed,
        })
    }

    /// Queues one frame for the publisher task, or drops it.
    /// The subject of node `to`.
    fn subject_of(&self, to: &str) -> Subject {
        if let Some(subject) = self.subjects.read().get(to) {
            return subject.clone();
        }
        let subject = Subject::from(format!("{}node.{to}", self.prefix));
        self.subjects.write().insert(to.to_owned(), subject.clone());
        subject
    }

    fn push(&self, subject: Subject, frame: Vec<u8>) {
        let counts = &self.counts;
        if self.closed.load(Ordering::Acquire) {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if counts.queued.fetch_add(1, Ordering::Relaxed) >= self.max_queued {
            counts.queued.fetch_sub(1, Ordering::Relaxed);
            counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let frame = Outgoing::Frame(subject, Bytes::from(frame));
        if self.outbox.send(frame).is_err() {
            counts.queued.fetch_sub(1, Ordering::Relaxed);
            counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Transport for NatsTransport {
    fn open(&self, node: &str, sink: Arc<dyn FrameSink>) -> Result<(), TransportError> {
        check_node(node)?;
        if self.closed.load(Ordering::Acquire) {
            return Err(TransportError::new(
                "the NATS transport was closed: connect a new one",
            ));
        }
        if self.driver.on_thread() {
            return Err(TransportError::new(
                "open waits for the NATS server, so it cannot be called from the \
                 transport's own thread (a key-value callback or the sink): call it from \
                 another thread",
            ));
        }
        let Some(control) = self.control_rx.lock().take() else {
            return Err(TransportError::new(
                "the NATS transport is already open: one transport receives for one node",
            ));
        };
        let (client, node_subject, all_subject) = (
            self.client.clone(),
            format!("{}node.{node}", self.prefix),
            format!("{}all", self.prefix),
        );
        let subscribing = async move {
            let subscribe = |subject: String| {
                let client = client.clone();
                async move {
                    client.subscribe(subject.clone()).await.map_err(|err| {
                        TransportError::with_source(
                            format!("cannot subscribe to {subject} on NATS ({err})"),
                            err,
                        )
                    })
                }
            };
            let to_node = subscribe(node_subject).await?;
            let to_all = subscribe(all_subject).await?;
            // The server handles a connection's messages in order: once it has
            // answered, it has taken the subscriptions, and frames sent to this node
            // from now on arrive.
            round_trip(&client).await.map_err(|why| {
                TransportError::new(format!(
                    "subscribed, but the NATS server did not confirm it ({why}): is it \
                     reachable?"
                ))
            })?;
            Ok::<_, TransportError>(tokio::spawn(receive(
                client, to_node, to_all, control, sink,
            )))
        };
        let guard = ROUND_TRIP_TIMEOUT + Duration::from_secs(1);
        match self.driver.run(subscribing, guard) {
            Some(Ok(receiver)) => {
                *self.receiver.lock() = Some(receiver);
                Ok(())
            }
            Some(Err(err)) => Err(err),
            None => Err(TransportError::new(format!(
                "subscribing on NATS took more than {guard:?}: is the server overloaded?"
            ))),
        }
    }

    fn send(&self, to: &str, frame: Vec<u8>) {
        if check_node(to).is_err() {
            // No node can have that name: nobody would receive it.
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.push(self.subject_of(to), frame);
    }

    fn broadcast(&self, frame: Vec<u8>) {
        self.push(Subject::from(format!("{}all", self.prefix)), frame);
    }

    fn kv(&self) -> &dyn KeyValue {
        &self.kv
    }

    fn queued(&self) -> usize {
        self.counts.queued.load(Ordering::Relaxed)
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.outbox.send(Outgoing::Stop);
        let _ = self.control.send(Control::Stop);
        // On the runtime's thread (a callback closing it) nothing can be waited for:
        // the runtime stops when the callback returns, and what is queued is lost.
        if !self.driver.on_thread() {
            let publisher = self.publisher.lock().take();
            let receiver = self.receiver.lock().take();
            let client = self.client.clone();
            let closing = async move {
                let flushed = async {
                    if let Some(publisher) = publisher {
                        let _ = publisher.await;
                    }
                    let _ = client.flush().await;
                };
                let _ = tokio::time::timeout(FLUSH_TIMEOUT, flushed).await;
                if let Some(receiver) = receiver {
                    let _ = tokio::time::timeout(STOP_TIMEOUT, receiver).await;
                }
            };
            let _ = self
                .driver
                .run(closing, FLUSH_TIMEOUT + STOP_TIMEOUT + STOP_TIMEOUT);
        }
        self.driver.stop();
    }
}

impl Drop for NatsTransport {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for NatsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsTransport")
            .field("bucket", &self.kv.bucket)
            .field("queued", &self.queued())
            .field("dropped", &self.dropped())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The first byte of a NATS message that carries several frames: `[BATCH]`, then
/// each frame as a little-endian `u32` length and its bytes. A lone frame that
/// starts with this byte travels as a batch of one, so any bytes cross intact.
const BATCH: u8 = 0xBA;

/// The most bytes of frames one NATS message carries (well under the server's
/// default 1 MiB payload limit).
const BATCH_BYTES: usize = 64 * 1024;

/// The publisher task: hands the queued frames to the client, in order. Frames
/// queued together for one node go out as one NATS message (see [`BATCH`]): under
/// load, the per-message cost of the client and the server is paid once for many
/// frames; alone, a frame goes out as it is. A publish waits while the client's
/// buffer is full (the server away).
async fn publish(
    client: Client,
    mut queue: mpsc::UnboundedReceiver<Outgoing>,
    counts: Arc<Counts>,
) {
    // A frame taken from the queue that did not fit the batch before it.
    let mut next: Option<(Subject, Bytes)> = None;
    loop {
        let (subject, first) = match next.take() {
            Some(frame) => frame,
            None => match queue.recv().await {
                Some(Outgoing::Frame(subject, frame)) => (subject, frame),
                Some(Outgoing::Stop) | None => return,
            },
        };
        let mut frames = 1;
        let mut batch: Option<Vec<u8>> = None;
        let mut stop = false;
        loop {
            match queue.try_recv() {
                Ok(Outgoing::Frame(to, frame)) => {
                    let size = batch.as_ref().map_or(1 + 4 + first.len(), Vec::len);
                    if to != subject || size + 4 + frame.len() > BATCH_BYTES {
                        next = Some((to, frame));
                        break;
                    }
                    let batch = batch.get_or_insert_with(|| {
                        let mut batch = Vec::with_capacity(BATCH_BYTES.min(4096));
                        batch.push(BATCH);
                        push_frame(&mut batch, &first);
                        batch
                    });
                    push_frame(batch, &frame);
                    frames += 1;
                }
                Ok(Outgoing::Stop) => {
                    stop = true;
                    break;
                }
                Err(_) => break,
            }
        }
        // A lone frame goes out as it is — unless it starts with the batch mark,
        // which would make it read as a batch: then as a batch of one (frames are
        // opaque bytes; the cluster's never start so, others might).
        if batch.is_none() && first.first() == Some(&BATCH) {
            let mut one = Vec::with_capacity(1 + 4 + first.len());
            one.push(BATCH);
            push_frame(&mut one, &first);
            batch = Some(one);
        }
        let payload = batch.map_or(first, Bytes::from);
        let published = client.publish(subject, payload).await;
        counts.queued.fetch_sub(frames, Ordering::Relaxed);
        if published.is_err() {
            counts.dropped.fetch_add(frames as u64, Ordering::Relaxed);
        }
        if stop {
            if let Some((subject, frame)) = next.take() {
                let published = client.publish(subject, frame).await;
                counts.queued.fetch_sub(1, Ordering::Relaxed);
                if published.is_err() {
                    counts.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
    }
}

/// Appends one frame to a batch.
fn push_frame(batch: &mut Vec<u8>, frame: &[u8]) {
    let len = u32::try_from(frame.len()).expect("a frame fits in 4 GiB");
    batch.extend_from_slice(&len.to_le_bytes());
    batch.extend_from_slice(frame);
}

/// Hands each frame of a NATS message to the sink: the message itself, or the
/// frames of a batch, in order. A malformed batch is dropped from where it breaks.
fn deliver(sink: &dyn FrameSink, payload: &[u8]) {
    let Some((&BATCH, mut rest)) = payload.split_first() else {
        sink.frame(payload);
        return;
    };
    while rest.len() >= 4 {
        let len = u32::from_le_bytes(rest[..4].try_into().expect("four bytes")) as usize;
        let Some(frame) = rest.get(4..4 + len) else {
            return;
        };
        sink.frame(frame);
        rest = &rest[4 + len..];
    }
}

enum Incoming {
    Frame(Message),
    Control(Control),
}

/// The receiver task: frames and the connection's changes to the sink, until the
/// close; then it unsubscribes.
async fn receive(
    client: Client,
    mut to_node: Subscriber,
    mut to_all: Subscriber,
    mut control: mpsc::UnboundedReceiver<Control>,
    sink: Arc<dyn FrameSink>,
) {
    // It was connected when it subscribed; events from before that are stale.
    let mut connected = true;
    {
        let frames = stream::select(to_node.by_ref(), to_all.by_ref()).map(Incoming::Frame);
        let control = stream::poll_fn(|cx| control.poll_recv(cx)).map(Incoming::Control);
        let mut incoming = stream::select(frames, control);
        while let Some(incoming) = incoming.next().await {
            match incoming {
                Incoming::Frame(message) => deliver(&*sink, &message.payload),
                Incoming::Control(Control::Connected(up)) => {
                    if up != connected {
                        if up {
                            // The client subscribes again as it reconnects; once the
                            // server has answered, the subscriptions are live, and
                            // only then is the sink told.
                            let _ = round_trip(&client).await;
                        }
                        connected = up;
                        sink.connected(up);
                    }
                }
                Incoming::Control(Control::Stop) => break,
            }
        }
    }
    let _ = to_node.unsubscribe().await;
    let _ = to_all.unsubscribe().await;
}

/// How long a round trip to the server may take.
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(5);

/// A request nobody answers, so that the server answers "no responders": the
/// server has handled everything this connection sent before it.
async fn round_trip(client: &Client) -> Result<(), String> {
    let request = client.request(client.new_inbox(), Bytes::new());
    match tokio::time::timeout(ROUND_TRIP_TIMEOUT, request).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) if err.kind() == RequestErrorKind::NoResponders => Ok(()),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("no answer within {:?}", ROUND_TRIP_TIMEOUT)),
    }
}

/// The wait before reconnection attempt `attempts` (from 1): none, then from 2 ms
/// doubling up to `max`.
fn reconnect_delay(attempts: usize, max: Duration) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let exponent = u32::try_from(attempts - 1).unwrap_or(u32::MAX).min(32);
    Duration::from_millis(2u64.saturating_pow(exponent)).min(max)
}

/// The cluster's bucket, created if it is missing.
///
/// It is created as the stream a key-value bucket is made of (`KV_<bucket>`, on
/// `$KV.<bucket>.>`, as `Context::create_key_value` would make it) because that
/// call first reads the account's JetStream limits, and async-nats 0.51 cannot
/// parse the answer of servers before 2.10 (it lacks the `reserved_*` fields).
async fn open_bucket(
    jetstream: &async_nats::jetstream::Context,
    bucket: &str,
    url: &str,
) -> Result<Store, TransportError> {
    if let Ok(store) = jetstream.get_key_value(bucket).await {
        return Ok(store);
    }
    let stream = async_nats::jetstream::stream::Config {
        name: format!("KV_{bucket}"),
        description: Some("wsched cluster: node incarnations and cluster-wide names".to_owned()),
        subjects: vec![format!("$KV.{bucket}.>")],
        // One value per key: a write replaces it, a delete leaves only its marker.
        max_messages_per_subject: 1,
        storage: StorageType::File,
        num_replicas: 1,
        discard: DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        ..Default::default()
    };
    // Another node may create it at the same time: whichever did, it is there.
    let created = jetstream.create_stream(stream).await.err();
    jetstream.get_key_value(bucket).await.map_err(|err| {
        let why = created.map_or_else(|| err.to_string(), |created| created.to_string());
        TransportError::with_source(
            format!(
                "cannot open or create the key-value bucket {bucket} on NATS at {url} \
                 ({why}): is JetStream enabled? start the server with \
                 `nats-server -js -sd DIR`"
            ),
            err,
        )
    })
}

/// The key-value store on the cluster's JetStream bucket.
struct NatsKv {
    handle: tokio::runtime::Handle,
    store: Store,
    bucket: String,
    /// The bound of one operation, all its requests together.
    timeout: Duration,
    closed: Arc<AtomicBool>,
}

impl NatsKv {
    /// Runs `operation` on the runtime; its result goes to `done`.
    fn run<T, F>(&self, done: Done<T>, operation: impl FnOnce(Store, String) -> F)
    where
        T: Send + 'static,
        F: Future<Output = Result<T, KvError>> + Send + 'static,
    {
        let done = CallOnce(Some(done));
        if self.closed.load(Ordering::Acquire) {
            return done.call(Err(closed()));
        }
        let running = operation(self.store.clone(), self.bucket.clone());
        let timeout = self.timeout;
        // The client bounds the wait for an answer, not the wait to hand it the
        // request, which lasts as long as the server is away once frames fill the
        // client's buffer: the whole operation is bounded here. (An operation that
        // timed out may still be carried out when the server is back.)
        let bounded = async move {
            tokio::time::timeout(timeout, running)
                .await
                .unwrap_or_else(|_| {
                    Err(KvError::Unavailable(format!(
                        "no answer from the NATS server within {timeout:?} (is it reachable?)"
                    )))
                })
        };
        // Dropped unrun if the runtime stops first: `done` is called then too.
        drop(self.handle.spawn(async move { done.call(bounded.await) }));
    }
}

impl KeyValue for NatsKv {
    fn get(&self, key: &str, done: Done<Option<KvEntry>>) {
        let key = key.to_owned();
        self.run(done, |store, bucket| async move {
            match store.entry(key.as_str()).await {
                Ok(Some(entry)) if entry.operation == Operation::Put => Ok(Some(KvEntry {
                    value: entry.value.to_vec(),
                    revision: entry.revision,
                })),
                // A deleted key keeps a delete marker as its last entry.
                Ok(_) => Ok(None),
                Err(err) => Err(unavailable("reading", &key, &bucket, &err)),
            }
        });
    }

    fn create(&self, key: &str, value: Vec<u8>, done: Done<Revision>) {
        let key = key.to_owned();
        self.run(done, |store, bucket| async move {
            create(&store, &bucket, &key, Bytes::from(value)).await
        });
    }

    fn update(&self, key: &str, value: Vec<u8>, revision: Revision, done: Done<Revision>) {
        let key = key.to_owned();
        self.run(done, |store, bucket| async move {
            match store
                .update(key.as_str(), Bytes::from(value), revision)
                .await
            {
                Ok(revision) => Ok(revision),
                Err(err) if err.kind() == UpdateErrorKind::WrongLastRevision => {
                    Err(KvError::Conflict)
                }
                Err(err) => Err(unavailable("updating", &key, &bucket, &err)),
            }
        });
    }

    fn delete(&self, key: &str, revision: Revision, done: Done<()>) {
        let key = key.to_owned();
        self.run(done, |store, bucket| async move {
            match store
                .delete_expect_revision(key.as_str(), Some(revision))
                .await
            {
                Ok(()) => Ok(()),
                Err(err) if err.kind() == UpdateErrorKind::WrongLastRevision => {
                    // Written since, or already without a value (never written, or
                    // deleted): only the first is a conflict.
                    match store.entry(key.as_str()).await {
                        Ok(Some(entry)) if entry.operation == Operation::Put => {
                            Err(KvError::Conflict)
                        }
                        Ok(_) => Ok(()),
                        Err(err) => Err(unavailable("deleting", &key, &bucket, &err)),
                    }
                }
                Err(err) => Err(unavailable("deleting", &key, &bucket, &err)),
            }
        });
    }
}

/// Writes `value` if the key has no value. JetStream's condition "last revision
/// 0" fails on a key that was deleted (its delete marker is its last revision), so
/// on a failure the marker's revision is the condition of a second try.
async fn create(store: &Store, bucket: &str, key: &str, value: Bytes) -> Result<Revision, KvError> {
    let mut expected = 0;
    // Each round that fails found the key written again in between; a few are
    // plenty, and then somebody else clearly holds it.
    for _ in 0..4 {
        match store.update(key, value.clone(), expected).await {
            Ok(revision) => return Ok(revision),
            Err(err) if err.kind() == UpdateErrorKind::WrongLastRevision => {}
            Err(err) => return Err(unavailable("creating", key, bucket, &err)),
        }
        match store.entry(key).await {
            Ok(Some(entry)) if entry.operation == Operation::Put => return Err(KvError::Conflict),
            Ok(Some(marker)) => expected = marker.revision,
            Ok(None) => expected = 0,
            Err(err) => return Err(unavailable("creating", key, bucket, &err)),
        }
    }
    Err(KvError::Conflict)
}

fn unavailable(what: &str, key: &str, bucket: &str, err: &dyn std::fmt::Display) -> KvError {
    KvError::Unavailable(format!(
        "{what} key {key:?} in the NATS key-value bucket {bucket} failed: {err} (is \
         nats-server reachable, with JetStream on?)"
    ))
}

fn closed() -> KvError {
    KvError::Unavailable("the NATS transport was closed".to_owned())
}

/// A key-value operation's callback, called exactly once: with the result, or with
/// [`KvError::Unavailable`] if the operation is dropped unfinished (the runtime
/// stopped).
struct CallOnce<T>(Option<Done<T>>);

impl<T> CallOnce<T> {
    fn call(mut self, result: Result<T, KvError>) {
        if let Some(done) = self.0.take() {
            done(result);
        }
    }
}

impl<T> Drop for CallOnce<T> {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(Err(closed()));
        }
    }
}

/// The transport's runtime: a current-thread tokio runtime, driven by a thread of
/// its own until [`stop`](Self::stop). (One thread is plenty for a broker's
/// client, and a task spawned from a scheduler's worker wakes exactly that one.)
struct Driver {
    handle: tokio::runtime::Handle,
    thread: ThreadId,
    stop: Arc<tokio::sync::Notify>,
    stopped: Mutex<Option<std_mpsc::Receiver<()>>>,
}

impl Driver {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let stop = Arc::new(tokio::sync::Notify::new());
        let (stopped_tx, stopped) = std_mpsc::channel();
        let thread = {
            let stop = stop.clone();
            thread::Builder::new()
                .name(THREAD_NAME.to_owned())
                .spawn(move || {
                    runtime.block_on(stop.notified());
                    // The tasks left (a publish waiting for a server that is away,
                    // a key-value operation) are dropped with it.
                    drop(runtime);
                    let _ = stopped_tx.send(());
                })?
        };
        Ok(Self {
            handle,
            thread: thread.thread().id(),
            stop,
            stopped: Mutex::new(Some(stopped)),
        })
    }

    fn on_thread(&self) -> bool {
        thread::current().id() == self.thread
    }

    /// Runs `future` on the runtime and waits up to `timeout` for its output;
    /// `None` if it takes longer (it goes on running) or the runtime has stopped.
    fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
        timeout: Duration,
    ) -> Option<T> {
        let (tx, rx) = std_mpsc::sync_channel(1);
        drop(self.handle.spawn(async move {
            let _ = tx.send(future.await);
        }));
        rx.recv_timeout(timeout).ok()
    }

    /// Stops the runtime, waiting a moment for its thread unless called from it.
    fn stop(&self) {
        // Stored if the thread is not waiting yet: it returns at once then.
        self.stop.notify_one();
        let stopped = self.stopped.lock().take();
        if let (Some(stopped), false) = (stopped, self.on_thread()) {
            let _ = stopped.recv_timeout(STOP_TIMEOUT);
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // A transport that failed to connect stops its thread here.
        self.stop();
    }
}

/// A cluster's name becomes a subject token and part of the bucket's name
/// (`wsched_<cluster>`), which JetStream limits to these characters.
fn check_cluster(cluster: &str) -> Result<(), TransportError> {
    let bad = cluster
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'));
    match (cluster.is_empty(), bad) {
        (true, _) => Err(TransportError::new(
            "the cluster's name is empty: give it a name of ASCII letters, digits, `-` and `_`",
        )),
        (false, Some(bad)) => Err(TransportError::new(format!(
            "the cluster's name {cluster:?} contains {bad:?}: it names NATS subjects and a \
             JetStream bucket, so use only ASCII letters, digits, `-` and `_`"
        ))),
        (false, None) => Ok(()),
    }
}

/// A node's name becomes one token of a NATS subject.
fn check_node(node: &str) -> Result<(), TransportError> {
    let bad = node
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '.' | '*' | '>'));
    match (node.is_empty(), bad) {
        (true, _) => Err(TransportError::new(
            "the node's name is empty: it must be a NATS subject token (no spaces, `.`, `*` \
             or `>`)",
        )),
        (false, Some(bad)) => Err(TransportError::new(format!(
            "the node's name {node:?} contains {bad:?}: it must be a NATS subject token (no \
             spaces, `.`, `*` or `>`)"
        ))),
        (false, None) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps what it is handed.
    #[derive(Default)]
    struct Kept(Mutex<Vec<Vec<u8>>>);

    impl FrameSink for Kept {
        fn frame(&self, frame: &[u8]) {
            self.0.lock().push(frame.to_vec());
        }
    }

    #[test]
    fn a_batch_hands_over_its_frames_in_order_and_a_lone_frame_as_it_is() {
        let kept = Kept::default();
        deliver(&kept, &[1, 2, 3]);
        // A frame that starts with the mark crosses as a batch of one.
        let mut one = vec![BATCH];
        push_frame(&mut one, &[BATCH, 7]);
        deliver(&kept, &one);
        let mut batch = vec![BATCH];
        for frame in [&[1_u8, 9][..], &[1, 8, 7], &[]] {
            push_frame(&mut batch, frame);
        }
        deliver(&kept, &batch);
        // Cut short: the whole frames before the cut still count.
        deliver(&kept, &batch[..batch.len() - 5]);
        assert_eq!(
            *kept.0.lock(),
            vec![
                vec![1, 2, 3],
                vec![BATCH, 7],
                vec![1, 9],
                vec![1, 8, 7],
                vec![],
                vec![1, 9]
            ]
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(check_cluster("prod-1_a").is_ok());
        for bad in ["", "a.b", "a b", "a*", "a>", "é"] {
            assert!(check_cluster(bad).is_err(), "{bad:?}");
        }
        assert!(check_node("node-1@host").is_ok());
        for bad in ["", "a.b", "a b", "a*", "a>", "a\tb"] {
            assert!(check_node(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reconnect_delays_double_up_to_the_bound() {
        let max = Duration::from_secs(1);
        assert_eq!(reconnect_delay(1, max), Duration::ZERO);
        assert_eq!(reconnect_delay(2, max), Duration::from_millis(2));
        assert_eq!(reconnect_delay(5, max), Duration::from_millis(16));
        assert_eq!(reconnect_delay(40, max), max);
        assert_eq!(reconnect_delay(usize::MAX, max), max);
    }
}
