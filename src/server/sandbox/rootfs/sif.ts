// The SIF container format, read without Apptainer: the global header, the descriptors, and the
// primary system partition (a squashfs image at an offset in the file). Layout from the reference
// Go implementation, apptainer/sif@e306d8b1 (pkg/sif/); Go's encoding/binary writes the structs
// packed and little-endian (descriptor.go@e306d8b1:119-124, load.go@e306d8b1:56-75).
import fs from 'node:fs/promises';
import { RaasError } from '../../../protocol/errors.js';

/** sif.go@e306d8b1:97 — hdrMagic, at offset 32 after the 32-byte launch script (sif.go@e306d8b1:92). */
export const SIF_MAGIC = Buffer.from('SIF_MAGIC\0', 'latin1');
/** sif.go@e306d8b1:105-117 — CurrentVersion (1) written as "%02d" into a 3-byte field. */
const SIF_VERSION = '01';

/** Byte offsets of the global header (sif.go@e306d8b1:325-342, `type header struct`); 128 bytes in all. */
export const HEADER = {
  launch: 0, // [32]byte
  magic: 32, // [10]byte
  version: 42, // [3]byte
  arch: 45, // [3]byte
  id: 48, // uuid [16]byte
  createdAt: 64, // int64
  modifiedAt: 72,
  descriptorsFree: 80,
  descriptorsTotal: 88,
  descriptorsOffset: 96,
  descriptorsSize: 104,
  dataOffset: 112,
  dataSize: 120,
  length: 128,
} as const;

/** Byte offsets of a descriptor (descriptor.go@e306d8b1:32-48, `type rawDescriptor struct`); 585 bytes. */
export const DESCRIPTOR = {
  dataType: 0, // int32
  used: 4, // bool
  id: 5, // uint32
  groupId: 9, // uint32
  linkedId: 13, // uint32
  offset: 17, // int64
  size: 25, // int64
  sizeWithPadding: 33, // int64
  createdAt: 41,
  modifiedAt: 49,
  uid: 57,
  gid: 65,
  name: 73, // [128]byte (descrNameLen, sif.go@e306d8b1:122)
  extra: 201, // [384]byte (descrMaxPrivLen, sif.go@e306d8b1:123)
  length: 585,
} as const;

/** sif.go@e306d8b1:131-134 — DataType values from 0x4001; DataPartition is the fourth. */
export const DATA_PARTITION = 0x4004;
/** sif.go@e306d8b1:178-183 — FSType: FsSquash = 1 … FsEncryptedSquashfs = 5, FsGocryptfsSquashfs = 6. */
const FS_TYPES: Record<number, string> = {
  1: 'squashfs',
  2: 'ext3',
  3: 'archive',
  4: 'raw',
  5: 'encrypted squashfs',
  6: 'gocryptfs squashfs',
};
export const FS_SQUASH = 1;
/** sif.go@e306d8b1:210-213 — PartType: PartSystem = 1, PartPrimSys = 2, PartData = 3, PartOverlay = 4. */
export const PART_PRIMSYS = 2;

/** The primary system partition of a SIF file. */
export interface SifPartition {
  /** Byte offset of the squashfs image in the file. */
  offset: number;
  size: number;
  /** Go architecture name of the partition (descriptor.go@e306d8b1:51-55, `partition.Arch`), 'unknown' if unset. */
  arch: string;
}

/** arch.go@e306d8b1:13-27 — the header's 3-byte architecture codes. */
const ARCHES: Record<string, string> = {
  '01': '386',
  '02': 'amd64',
  '03': 'arm',
  '04': 'arm64',
  '05': 'ppc64',
  '06': 'ppc64le',
  '07': 'mips',
  '08': 'mipsle',
  '09': 'mips64',
  '10': 'mips64le',
  '11': 's390x',
  '12': 'riscv64',
  '13': 'loong64',
};

function bad(file: string, why: string): RaasError {
  return new RaasError('invalid_instance', `rootfs image ${file}: ${why}`, { retryable: false });
}

function int64(b: Buffer, at: number, file: string): number {
  const v = b.readBigInt64LE(at);
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) throw bad(file, `not a SIF file (field at byte ${at} out of range)`);
  return Number(v);
}

/** True when `head` (the first 48+ bytes of a file) starts a SIF header. */
export function isSif(head: Buffer): boolean {
  return head.length >= HEADER.magic + SIF_MAGIC.length && head.subarray(HEADER.magic, HEADER.magic + SIF_MAGIC.length).equals(SIF_MAGIC);
}

/**
 * Reads the header and descriptors of a SIF file and returns its primary system partition, which
 * must be squashfs (apptainer mounts the same one). Throws RaasError('invalid_instance') naming the file.
 */
export async function readSifPartition(file: string, signal?: AbortSignal): Promise<SifPartition> {
  signal?.throwIfAborted();
  const fh = await fs.open(file, 'r');
  try {
    const fileSize = (await fh.stat()).size;
    const h = Buffer.alloc(HEADER.length);
    const { bytesRead } = await fh.read(h, 0, HEADER.length, 0);
    if (bytesRead < HEADER.length || !isSif(h))
      throw bad(file, 'not a SIF file (bad magic); rebuild it with `apptainer build` or `apptainer pull`');
    const version = h.toString('latin1', HEADER.version, HEADER.version + 3).replace(/\0+$/, '');
    if (version !== SIF_VERSION) throw bad(file, `SIF version "${version}" is not supported (only ${SIF_VERSION})`);
    const total = int64(h, HEADER.descriptorsTotal, file);
    const dOff = int64(h, HEADER.descriptorsOffset, file);
    const dSize = int64(h, HEADER.descriptorsSize, file);
    if (total > 65536 || total * DESCRIPTOR.length > dSize || dOff + dSize > fileSize) {
      throw bad(file, `corrupt SIF header (${total} descriptors at ${dOff}+${dSize} in a ${fileSize}-byte file)`);
    }
    const d = Buffer.alloc(total * DESCRIPTOR.length);
    await fh.read(d, 0, d.length, dOff);
    const found: string[] = [];
    for (let i = 0; i < total; i++) {
      const at = i * DESCRIPTOR.length;
      if (d[at + DESCRIPTOR.used] === 0 || d.readInt32LE(at + DESCRIPTOR.dataType) !== DATA_PARTITION) continue;
      const x = at + DESCRIPTOR.extra;
      const fsType = d.readInt32LE(x);
      const partType = d.readInt32LE(x + 4);
      found.push(`${FS_TYPES[fsType] ?? `fs ${fsType}`} (part type ${partType})`);
      if (partType !== PART_PRIMSYS) continue;
      if (fsType !== FS_SQUASH) {
        throw bad(
          file,
          `the primary partition is ${FS_TYPES[fsType] ?? `fs type ${fsType}`}, only plain squashfs can be unpacked without Apptainer`,
        );
      }
      const offset = int64(d, at + DESCRIPTOR.offset, file);
      const size = int64(d, at + DESCRIPTOR.size, file);
      if (offset + size > fileSize) throw bad(file, `truncated SIF (partition ends at ${offset + size}, file has ${fileSize} bytes)`);
      const magic = Buffer.alloc(4);
      await fh.read(magic, 0, 4, offset);
      // squashfs superblocks start with "hsqs" (little-endian 0x73717368).
      if (magic.toString('latin1') !== 'hsqs') throw bad(file, `corrupt SIF (no squashfs superblock at offset ${offset})`);
      const archCode = d.toString('latin1', x + 8, x + 10);
      return { offset, size, arch: ARCHES[archCode] ?? 'unknown' };
    }
    throw bad(file, `SIF file has no primary system partition (partitions: ${found.join(', ') || 'none'})`);
  } finally {
    await fh.close();
  }
}

/** The Go architecture name of this host (what a SIF partition's arch must match). */
export function hostGoArch(): string {
  const map: Record<string, string> = {
    x64: 'amd64',
    ia32: '386',
    arm64: 'arm64',
    arm: 'arm',
    ppc64: 'ppc64le',
    s390x: 's390x',
    riscv64: 'riscv64',
    loong64: 'loong64',
  };
  return map[process.arch] ?? process.arch;
}
