// A SIF file around a squashfs image, laid out as the reference Go implementation lays it out
// (apptainer/sif@e306d8b1, pkg/sif/create.go): a 128-byte global header, room for 48 descriptors of
// 585 bytes at offset 4096 (CreateContainer's defaults, create.go@e306d8b1:315-316), the data
// section right after them, a partition at the next 4096-byte boundary (NewDescriptorInput aligns
// DataPartition objects only, descriptor_input.go@e306d8b1:295-297; nextAligned, create.go@e306d8b1:29),
// other objects unaligned, in group 1 (DefaultObjectGroup | descrGroupMask, descriptor_input.go@e306d8b1:326), everything
// little-endian and packed as encoding/binary.Write writes the structs (create.go@e306d8b1:137,146).
// Checked while writing this against the library's own test image test/images/one-group.sif@e306d8b1
// (descriptors at 0x1000, 28080 bytes of them, a squashfs primary partition at 0x9000).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { DATA_PARTITION, DESCRIPTOR, FS_SQUASH, HEADER, PART_PRIMSYS, SIF_MAGIC } from '../../src/server/sandbox/rootfs/sif.js';

const DESCRIPTORS = 48;
const DESCRIPTORS_OFFSET = 4096;
const ALIGN = 4096;
/** The launch script `apptainer build` writes (sif.go@e306d8b1:92: 32 bytes, "#!/usr/bin/env... "). */
const LAUNCH = '#!/usr/bin/env run-singularity\n';

/** What to put in the SIF besides the squashfs partition. */
export interface SifOptions {
  /** Go architecture of the partition (arch.go@e306d8b1:13-27); default amd64. */
  arch?: string;
  /** Extra data objects before the partition (a definition file, as `apptainer build` adds one), data type → bytes. */
  before?: Array<{ dataType: number; data: Buffer; name?: string }>;
  /** Write the partition with this FSType / PartType instead (for tests of refused files). */
  fsType?: number;
  partType?: number;
}

const ARCH_CODES: Record<string, string> = { '386': '01', amd64: '02', arm: '03', arm64: '04', ppc64le: '06', s390x: '11', riscv64: '12' };

/** Writes `out`, a SIF file whose primary system partition is the squashfs image `squashfs`. */
export function writeSif(squashfs: string, out: string, o: SifOptions = {}): void {
  const arch = Buffer.from(`${ARCH_CODES[o.arch ?? 'amd64'] ?? '00'}\0`, 'latin1');
  const now = BigInt(Math.floor(Date.now() / 1000));
  const objects = [
    ...(o.before ?? []).map((b) => ({ ...b, partition: false })),
    { dataType: DATA_PARTITION, data: fs.readFileSync(squashfs), name: 'FS', partition: true },
  ];
  const descriptors = Buffer.alloc(DESCRIPTORS * DESCRIPTOR.length);
  const dataOffset = DESCRIPTORS_OFFSET + descriptors.length;
  const chunks: Array<{ at: number; data: Buffer }> = [];
  let end = dataOffset;
  objects.forEach((obj, i) => {
    const at = obj.partition ? Math.ceil(end / ALIGN) * ALIGN : end;
    const d = i * DESCRIPTOR.length;
    descriptors.writeInt32LE(obj.dataType, d + DESCRIPTOR.dataType);
    descriptors[d + DESCRIPTOR.used] = 1;
    descriptors.writeUInt32LE(i + 1, d + DESCRIPTOR.id);
    descriptors.writeUInt32LE(0xf0000001, d + DESCRIPTOR.groupId);
    descriptors.writeBigInt64LE(BigInt(at), d + DESCRIPTOR.offset);
    descriptors.writeBigInt64LE(BigInt(obj.data.length), d + DESCRIPTOR.size);
    descriptors.writeBigInt64LE(BigInt(at - end + obj.data.length), d + DESCRIPTOR.sizeWithPadding);
    descriptors.writeBigInt64LE(now, d + DESCRIPTOR.createdAt);
    descriptors.writeBigInt64LE(now, d + DESCRIPTOR.modifiedAt);
    descriptors.write((obj.name ?? '').slice(0, 127), d + DESCRIPTOR.name, 'latin1');
    if (obj.partition) {
      // partition{Fstype int32, Parttype int32, Arch [3]byte} (descriptor.go@e306d8b1:51-55).
      descriptors.writeInt32LE(o.fsType ?? FS_SQUASH, d + DESCRIPTOR.extra);
      descriptors.writeInt32LE(o.partType ?? PART_PRIMSYS, d + DESCRIPTOR.extra + 4);
      arch.copy(descriptors, d + DESCRIPTOR.extra + 8);
    }
    chunks.push({ at, data: obj.data });
    end = at + obj.data.length;
  });
  const h = Buffer.alloc(HEADER.length);
  h.write(LAUNCH, HEADER.launch, 'latin1');
  SIF_MAGIC.copy(h, HEADER.magic);
  h.write('01\0', HEADER.version, 'latin1');
  arch.copy(h, HEADER.arch);
  randomBytes(16).copy(h, HEADER.id);
  h.writeBigInt64LE(now, HEADER.createdAt);
  h.writeBigInt64LE(now, HEADER.modifiedAt);
  h.writeBigInt64LE(BigInt(DESCRIPTORS - objects.length), HEADER.descriptorsFree);
  h.writeBigInt64LE(BigInt(DESCRIPTORS), HEADER.descriptorsTotal);
  h.writeBigInt64LE(BigInt(DESCRIPTORS_OFFSET), HEADER.descriptorsOffset);
  h.writeBigInt64LE(BigInt(descriptors.length), HEADER.descriptorsSize);
  h.writeBigInt64LE(BigInt(dataOffset), HEADER.dataOffset);
  h.writeBigInt64LE(BigInt(end - dataOffset), HEADER.dataSize);
  const fd = fs.openSync(`${out}.part`, 'w');
  try {
    fs.writeSync(fd, h, 0, h.length, 0);
    fs.writeSync(fd, descriptors, 0, descriptors.length, DESCRIPTORS_OFFSET);
    for (const c of chunks) fs.writeSync(fd, c.data, 0, c.data.length, c.at);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(`${out}.part`, out);
}
