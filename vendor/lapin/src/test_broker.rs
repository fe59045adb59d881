//! A scripted AMQP 0.9.1 peer for the unit tests: it accepts one connection on
//! 127.0.0.1, shakes hands as RabbitMQ does, then reads and writes the frames a
//! test asks for. It runs on a thread of its own, with blocking I/O.

use crate::{
    BasicProperties,
    protocol::{AMQPClass, basic, channel, confirm, connection},
    types::{AMQPValue, ChannelId, FieldTable, LongString, ShortString},
};
use amq_protocol::frame::{AMQPContentHeader, AMQPFrame, WriteContext, gen_frame, parse_frame};
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::Duration,
};

pub(crate) struct TestBroker {
    listener: TcpListener,
}

impl TestBroker {
    pub(crate) fn bind() -> Self {
        Self {
            listener: TcpListener::bind("127.0.0.1:0").expect("bind the test broker"),
        }
    }

    /// The URI a client connects to this broker with.
    pub(crate) fn uri(&self) -> String {
        let port = self.listener.local_addr().expect("local address").port();
        format!("amqp://guest:guest@127.0.0.1:{port}/%2f")
    }

    /// Accepts one connection and opens it: `connection.start` with
    /// `server_properties`, then `connection.tune` with `frame_max`.
    pub(crate) fn accept(self, frame_max: u32, server_properties: FieldTable) -> Peer {
        let (stream, _) = self.listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let mut peer = Peer {
            stream,
            received: Vec::new(),
        };
        let mut header = [0u8; 8];
        peer.stream
            .read_exact(&mut header)
            .expect("protocol header");
        assert_eq!(&header, b"AMQP\x00\x00\x09\x01");
        peer.send_method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Start(connection::Start {
                version_major: 0,
                version_minor: 9,
                server_properties,
                mechanisms: "PLAIN AMQPLAIN".into(),
                locales: "en_US".into(),
            })),
        );
        peer.expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::StartOk(_))));
        peer.send_method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Tune(connection::Tune {
                channel_max: 2047,
                frame_max,
                heartbeat: 0,
            })),
        );
        peer.expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::TuneOk(_))));
        peer.expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::Open(_))));
        peer.send_method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::OpenOk(connection::OpenOk {})),
        );
        peer
    }
}

/// The broker's end of one accepted connection.
pub(crate) struct Peer {
    stream: TcpStream,
    received: Vec<u8>,
}

impl Peer {
    pub(crate) fn send(&mut self, frame: &AMQPFrame) {
        self.stream.write_all(&encode(frame)).expect("send a frame");
    }

    pub(crate) fn send_method(&mut self, channel_id: ChannelId, method: AMQPClass) {
        self.send(&AMQPFrame::Method(channel_id, method));
    }

    /// The next frame the client sends, heartbeats aside.
    pub(crate) fn recv(&mut self) -> AMQPFrame {
        loop {
            match parse_frame(&self.received[..]) {
                Ok((rest, frame)) => {
                    let consumed = self.received.len() - rest.len();
                    self.received.drain(..consumed);
                    if !matches!(frame, AMQPFrame::Heartbeat) {
                        return frame;
                    }
                }
                Err(err) if err.is_incomplete() => {
                    let mut buf = [0u8; 16384];
                    let read = self.stream.read(&mut buf).expect("read from the client");
                    assert!(read > 0, "the client closed the connection");
                    self.received.extend_from_slice(&buf[..read]);
                }
                Err(err) => panic!("the client sent a frame that does not parse: {err:?}"),
            }
        }
    }

    /// The next method the client sends, which must be one `is` accepts.
    pub(crate) fn expect(&mut self, is: impl Fn(&AMQPClass) -> bool) -> (ChannelId, AMQPClass) {
        match self.recv() {
            AMQPFrame::Method(channel_id, method) if is(&method) => (channel_id, method),
            other => panic!("unexpected frame from the client: {other:?}"),
        }
    }

    /// Answers the client's `channel.open`; returns the channel's id.
    pub(crate) fn open_channel(&mut self) -> ChannelId {
        let (id, _) =
            self.expect(|m| matches!(m, AMQPClass::Channel(channel::AMQPMethod::Open(_))));
        self.send_method(
            id,
            AMQPClass::Channel(channel::AMQPMethod::OpenOk(channel::OpenOk {})),
        );
        id
    }

    /// Answers the client's `confirm.select`.
    pub(crate) fn select_confirms(&mut self, id: ChannelId) {
        self.expect(|m| matches!(m, AMQPClass::Confirm(confirm::AMQPMethod::Select(_))));
        self.send_method(
            id,
            AMQPClass::Confirm(confirm::AMQPMethod::SelectOk(confirm::SelectOk {})),
        );
    }

    /// Answers the client's `basic.consume`; returns its consumer tag.
    pub(crate) fn consume(&mut self, id: ChannelId) -> ShortString {
        let (_, method) =
            self.expect(|m| matches!(m, AMQPClass::Basic(basic::AMQPMethod::Consume(_))));
        let AMQPClass::Basic(basic::AMQPMethod::Consume(consume)) = method else {
            unreachable!()
        };
        self.send_method(
            id,
            AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(basic::ConsumeOk {
                consumer_tag: consume.consumer_tag.clone(),
            })),
        );
        consume.consumer_tag
    }

    /// Delivers a message to `consumer_tag`: its `basic.deliver`, then `header`
    /// and `body` as they are.
    pub(crate) fn deliver(
        &mut self,
        id: ChannelId,
        consumer_tag: &ShortString,
        header: AMQPFrame,
        body: &[u8],
    ) {
        self.send_method(
            id,
            AMQPClass::Basic(basic::AMQPMethod::Deliver(basic::Deliver {
                consumer_tag: consumer_tag.clone(),
                delivery_tag: 1,
                redelivered: false,
                exchange: "".into(),
                routing_key: "work".into(),
            })),
        );
        self.send(&header);
        if !body.is_empty() {
            self.send(&AMQPFrame::Body(id, body.to_vec()));
        }
    }
}

/// A frame as it goes on the wire.
pub(crate) fn encode(frame: &AMQPFrame) -> Vec<u8> {
    gen_frame(frame)(WriteContext::from(Vec::new()))
        .expect("serialize a frame")
        .write
}

/// The content header of a body of `body_size` bytes, with a header table
/// padded so that the whole frame is `frame_size` bytes long.
pub(crate) fn header_frame_of_size(
    channel_id: ChannelId,
    body_size: u64,
    frame_size: usize,
) -> AMQPFrame {
    let frame = |pad: usize| {
        let mut headers = FieldTable::default();
        headers.insert(
            "pad".into(),
            AMQPValue::LongString(LongString::from("x".repeat(pad))),
        );
        AMQPFrame::Header(
            channel_id,
            AMQPContentHeader {
                class_id: 60,
                body_size,
                properties: BasicProperties::default().with_headers(headers),
            },
        )
    };
    let frame = frame(frame_size - encode(&frame(0)).len());
    assert_eq!(encode(&frame).len(), frame_size);
    frame
}
