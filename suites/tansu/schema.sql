-- Wrack's own PostgreSQL schema for Tansu 0.6.0's storage engine (`--storage-engine postgres://...`).
--
-- Written for this project from what Tansu 0.6.0's PostgreSQL engine asks of the database
-- (docs/tansu.md, "The schema"): the crate tansu-storage 0.6.0's src/sql/*.sql and
-- src/pg/record_fetch.sql name every table and column; src/pg.rs gives each parameter's and
-- column's Rust type, which tokio-postgres maps strictly (i16 smallint, i32 integer,
-- i64 bigint, String text, Uuid uuid, SystemTime timestamptz, &[u8] bytea,
-- serde_json::Value jsonb), and the binary COPY of records and headers lists its column types
-- explicitly (int4, int8, int2, int8, int2, timestamptz, bytea, bytea).
-- Run once on an empty database by suites/tansu/postgres.py; every statement is idempotent.

create table if not exists cluster (
    id serial primary key,
    name text not null unique,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp
);

create table if not exists topic (
    id serial primary key,
    cluster integer not null references cluster (id) on delete cascade,
    name text not null,
    uuid uuid not null,
    partitions integer not null,
    replication_factor integer not null,
    is_internal boolean not null default false,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (cluster, name),
    unique (cluster, uuid)
);

create table if not exists topic_configuration (
    id serial primary key,
    topic integer not null references topic (id) on delete cascade,
    name text not null,
    value text,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (topic, name)
);

-- a topic's partition ("topic-partition")
create table if not exists topition (
    id serial primary key,
    topic integer not null references topic (id) on delete cascade,
    partition integer not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (topic, partition)
);

-- low and high watermarks (offsets) of a partition; the row produce locks (for no key update)
create table if not exists watermark (
    id serial primary key,
    topition integer not null unique references topition (id) on delete cascade,
    low bigint,
    high bigint,
    stable bigint,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp
);

-- one row per record; transaction_id is the writing transaction's id (record_fetch_pg
-- compares it with pg_snapshot_xmin(pg_current_snapshot()), an xid8)
create table if not exists record (
    topition integer not null references topition (id) on delete cascade,
    offset_id bigint not null,
    attributes smallint,
    producer_id bigint,
    producer_epoch smallint,
    timestamp timestamptz,
    k bytea,
    v bytea,
    transaction_id xid8 not null default pg_current_xact_id(),
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    primary key (topition, offset_id)
);

create table if not exists header (
    id bigserial primary key,
    topition integer not null,
    offset_id bigint not null,
    k bytea,
    v bytea,
    created_at timestamptz not null default current_timestamp,
    foreign key (topition, offset_id) references record (topition, offset_id) on delete cascade
);
create index if not exists header_record on header (topition, offset_id);

create table if not exists consumer_group (
    id serial primary key,
    cluster integer not null references cluster (id) on delete cascade,
    name text not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (cluster, name)
);

-- a group's state (members, generation, assignments) as JSON, replaced under an e_tag
-- compare (consumer_group_detail_insert.sql)
create table if not exists consumer_group_detail (
    id serial primary key,
    consumer_group integer not null unique references consumer_group (id) on delete cascade,
    e_tag uuid not null,
    detail jsonb not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp
);

create table if not exists consumer_offset (
    id serial primary key,
    consumer_group integer not null references consumer_group (id) on delete cascade,
    topition integer not null references topition (id) on delete cascade,
    committed_offset bigint not null,
    leader_epoch integer,
    timestamp timestamptz,
    metadata text,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (consumer_group, topition)
);

create table if not exists producer (
    id bigserial primary key,
    cluster integer not null references cluster (id) on delete cascade,
    epoch smallint not null default 0,
    sequence integer not null default 0,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp
);

create table if not exists producer_epoch (
    id serial primary key,
    producer bigint not null references producer (id) on delete cascade,
    epoch smallint not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (producer, epoch)
);

-- an idempotent producer's next sequence per partition and epoch
create table if not exists producer_detail (
    id serial primary key,
    producer_epoch integer not null references producer_epoch (id) on delete cascade,
    topition integer not null references topition (id) on delete cascade,
    sequence integer not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (producer_epoch, topition)
);

create table if not exists scram_credential (
    id serial primary key,
    cluster integer not null references cluster (id) on delete cascade,
    username text not null,
    mechanism text not null,
    salt bytea not null,
    iterations integer not null,
    stored_key bytea not null,
    server_key bytea not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (cluster, username, mechanism)
);

-- transactions (Wrack does not run them on Tansu, but fetch and list-offsets read these
-- tables for the last stable offset, so they must exist with the right types)
create table if not exists txn (
    id serial primary key,
    cluster integer not null references cluster (id) on delete cascade,
    name text not null,
    producer bigint not null references producer (id) on delete cascade,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (cluster, name)
);

create table if not exists txn_detail (
    id serial primary key,
    "transaction" integer not null references txn (id) on delete cascade,
    producer_epoch integer not null references producer_epoch (id) on delete cascade,
    transaction_timeout_ms integer,
    status text,
    started_at timestamptz,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique ("transaction", producer_epoch)
);

create table if not exists txn_topition (
    id serial primary key,
    txn_detail integer not null references txn_detail (id) on delete cascade,
    topition integer not null references topition (id) on delete cascade,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (txn_detail, topition)
);

create table if not exists txn_produce_offset (
    id serial primary key,
    txn_topition integer not null unique references txn_topition (id) on delete cascade,
    offset_start bigint not null,
    offset_end bigint not null,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp
);

create table if not exists txn_offset_commit (
    id serial primary key,
    txn_detail integer not null references txn_detail (id) on delete cascade,
    consumer_group integer not null references consumer_group (id) on delete cascade,
    generation_id integer,
    member_id text,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (txn_detail, consumer_group)
);

create table if not exists txn_offset_commit_tp (
    id serial primary key,
    offset_commit integer not null references txn_offset_commit (id) on delete cascade,
    topition integer not null references topition (id) on delete cascade,
    committed_offset bigint not null,
    leader_epoch integer,
    metadata text,
    created_at timestamptz not null default current_timestamp,
    last_updated timestamptz not null default current_timestamp,
    unique (offset_commit, topition)
);
