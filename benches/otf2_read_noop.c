/* The OTF2 benchmark's baseline: the official OTF2 library reading an archive with no-op
 * callbacks, the reference's decode limit.
 *
 *     otf2_read_noop ANCHOR [--per-location]
 *
 * Opens ANCHOR (an archive's traces.otf2) with OTF2_Reader, reads the global definitions
 * (collecting the location ids), every location's local definitions (clock offsets, mapping
 * tables) and every event record of every location, each record handed to a callback that does
 * nothing. By default the events are read through the global event reader, which merges the
 * locations by time as `otf2-print` and mtfdb's import do; with --per-location each location is
 * read on its own, one after the other (no merge). Prints one line:
 *
 *     {"locations": L, "definitions": D, "events": E}
 *
 * and exits 0, or prints the failing call and exits 1.
 *
 * Compiled by benches/otf2.rs with `cc -O2 ... -lotf2` (Debian's libotf2-trace-dev).
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <otf2/otf2.h>

/* The location ids of the global definitions. */
struct locations {
    uint64_t* ids;
    size_t count;
    size_t capacity;
};

static void check(OTF2_ErrorCode status, const char* what)
{
    if (status != OTF2_SUCCESS) {
        fprintf(stderr, "otf2_read_noop: %s: %s\n", what, OTF2_Error_GetName(status));
        exit(1);
    }
}

/* Definitions: the locations are kept, everything else the benchmark's archives hold is
 * decoded and dropped (the unknown callback serves the global and the local reader). */

static OTF2_CallbackCode def_location(void* data, OTF2_LocationRef self, OTF2_StringRef name,
                                      OTF2_LocationType type, uint64_t events,
                                      OTF2_LocationGroupRef group)
{
    struct locations* l = data;
    if (l->count == l->capacity) {
        l->capacity = l->capacity ? 2 * l->capacity : 1024;
        l->ids = realloc(l->ids, l->capacity * sizeof *l->ids);
        if (!l->ids) {
            fprintf(stderr, "otf2_read_noop: out of memory\n");
            exit(1);
        }
    }
    l->ids[l->count++] = self;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_string(void* d, OTF2_StringRef self, const char* s)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_clock_properties(void* d, uint64_t resolution, uint64_t offset,
                                              uint64_t length, uint64_t realtime)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_paradigm(void* d, OTF2_Paradigm p, OTF2_StringRef name,
                                      OTF2_ParadigmClass c)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_system_tree_node(void* d, OTF2_SystemTreeNodeRef self,
                                              OTF2_StringRef name, OTF2_StringRef class_name,
                                              OTF2_SystemTreeNodeRef parent)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_location_group(void* d, OTF2_LocationGroupRef self,
                                            OTF2_StringRef name, OTF2_LocationGroupType type,
                                            OTF2_SystemTreeNodeRef parent,
                                            OTF2_LocationGroupRef creator)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_region(void* d, OTF2_RegionRef self, OTF2_StringRef name,
                                    OTF2_StringRef canonical, OTF2_StringRef description,
                                    OTF2_RegionRole role, OTF2_Paradigm paradigm,
                                    OTF2_RegionFlag flags, OTF2_StringRef file, uint32_t begin,
                                    uint32_t end)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_group(void* d, OTF2_GroupRef self, OTF2_StringRef name,
                                   OTF2_GroupType type, OTF2_Paradigm paradigm,
                                   OTF2_GroupFlag flags, uint32_t n, const uint64_t* members)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_comm(void* d, OTF2_CommRef self, OTF2_StringRef name,
                                  OTF2_GroupRef group, OTF2_CommRef parent, OTF2_CommFlag flags)
{
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_unknown(void* d)
{
    return OTF2_CALLBACK_SUCCESS;
}

/* Local definitions: Score-P's clock offsets. */

static OTF2_CallbackCode local_clock_offset(void* d, OTF2_TimeStamp time, int64_t offset,
                                            double deviation)
{
    return OTF2_CALLBACK_SUCCESS;
}

/* Events: every record type the benchmark's archives hold, and any other. The global
 * (merged) reader's callbacks and the per-location reader's differ only in the latter's event
 * position argument; EVENT_CALLBACKS defines one set for each. */

#define MERGED_ARGS OTF2_LocationRef loc, OTF2_TimeStamp time, void* d, OTF2_AttributeList* a
#define LOCAL_ARGS                                                                           \
    OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t position, void* d, OTF2_AttributeList* a

#define EVENT_CALLBACKS(P, ARGS)                                                             \
    static OTF2_CallbackCode P##_program_begin(ARGS, OTF2_StringRef name, uint32_t n,        \
                                               const OTF2_StringRef* args)                   \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_program_end(ARGS, int64_t status)                           \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_region(ARGS, OTF2_RegionRef region)                         \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_p2p(ARGS, uint32_t peer, OTF2_CommRef comm, uint32_t tag,   \
                                     uint64_t length, uint64_t request)                      \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_request(ARGS, uint64_t request)                             \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_collective_begin(ARGS)                                      \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_collective_end(ARGS, OTF2_CollectiveOp op,                  \
                                                OTF2_CommRef comm, uint32_t root,            \
                                                uint64_t sent, uint64_t received)            \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }                                                                                        \
    static OTF2_CallbackCode P##_unknown(ARGS)                                               \
    {                                                                                        \
        return OTF2_CALLBACK_SUCCESS;                                                        \
    }

EVENT_CALLBACKS(merged, MERGED_ARGS)
EVENT_CALLBACKS(per_location, LOCAL_ARGS)

/* Registers one set of no-op event callbacks on a callbacks struct of either reader (their
 * setters have the same names but for the prefix). */
#define SET_EVENT_CALLBACKS(SETTER, cb, P)                                                   \
    do {                                                                                     \
        check(SETTER##_SetProgramBeginCallback(cb, P##_program_begin), "ProgramBegin");      \
        check(SETTER##_SetProgramEndCallback(cb, P##_program_end), "ProgramEnd");            \
        check(SETTER##_SetEnterCallback(cb, P##_region), "Enter");                           \
        check(SETTER##_SetLeaveCallback(cb, P##_region), "Leave");                           \
        check(SETTER##_SetMpiIsendCallback(cb, P##_p2p), "MpiIsend");                        \
        check(SETTER##_SetMpiIrecvCallback(cb, P##_p2p), "MpiIrecv");                        \
        check(SETTER##_SetMpiIsendCompleteCallback(cb, P##_request), "MpiIsendComplete");    \
        check(SETTER##_SetMpiIrecvRequestCallback(cb, P##_request), "MpiIrecvRequest");      \
        check(SETTER##_SetMpiCollectiveBeginCallback(cb, P##_collective_begin),              \
              "MpiCollectiveBegin");                                                         \
        check(SETTER##_SetMpiCollectiveEndCallback(cb, P##_collective_end),                  \
              "MpiCollectiveEnd");                                                           \
        check(SETTER##_SetUnknownCallback(cb, P##_unknown), "Unknown");                      \
    } while (0)

int main(int argc, char** argv)
{
    int per_location = argc == 3 && strcmp(argv[2], "--per-location") == 0;
    if (argc < 2 || (argc == 3 && !per_location) || argc > 3) {
        fprintf(stderr, "usage: otf2_read_noop ANCHOR [--per-location]\n");
        return 2;
    }
    OTF2_Reader* reader = OTF2_Reader_Open(argv[1]);
    if (!reader) {
        fprintf(stderr, "otf2_read_noop: cannot open %s\n", argv[1]);
        return 1;
    }
    check(OTF2_Reader_SetSerialCollectiveCallbacks(reader), "SetSerialCollectiveCallbacks");

    struct locations locations = { 0 };
    OTF2_GlobalDefReader* defs = OTF2_Reader_GetGlobalDefReader(reader);
    OTF2_GlobalDefReaderCallbacks* def_cb = OTF2_GlobalDefReaderCallbacks_New();
    check(OTF2_GlobalDefReaderCallbacks_SetLocationCallback(def_cb, def_location), "Location");
    check(OTF2_GlobalDefReaderCallbacks_SetStringCallback(def_cb, def_string), "String");
    check(OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(def_cb, def_clock_properties),
          "ClockProperties");
    check(OTF2_GlobalDefReaderCallbacks_SetParadigmCallback(def_cb, def_paradigm), "Paradigm");
    check(OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeCallback(def_cb, def_system_tree_node),
          "SystemTreeNode");
    check(OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(def_cb, def_location_group),
          "LocationGroup");
    check(OTF2_GlobalDefReaderCallbacks_SetRegionCallback(def_cb, def_region), "Region");
    check(OTF2_GlobalDefReaderCallbacks_SetGroupCallback(def_cb, def_group), "Group");
    check(OTF2_GlobalDefReaderCallbacks_SetCommCallback(def_cb, def_comm), "Comm");
    check(OTF2_GlobalDefReaderCallbacks_SetUnknownCallback(def_cb, def_unknown), "Unknown");
    check(OTF2_Reader_RegisterGlobalDefCallbacks(reader, defs, def_cb, &locations),
          "RegisterGlobalDefCallbacks");
    OTF2_GlobalDefReaderCallbacks_Delete(def_cb);
    uint64_t definitions = 0;
    check(OTF2_Reader_ReadAllGlobalDefinitions(reader, defs, &definitions),
          "ReadAllGlobalDefinitions");

    for (size_t i = 0; i < locations.count; i++) {
        check(OTF2_Reader_SelectLocation(reader, locations.ids[i]), "SelectLocation");
    }
    /* Local definition files are optional in OTF2. */
    int have_local_defs = OTF2_Reader_OpenDefFiles(reader) == OTF2_SUCCESS;
    check(OTF2_Reader_OpenEvtFiles(reader), "OpenEvtFiles");
    OTF2_DefReaderCallbacks* local_cb = OTF2_DefReaderCallbacks_New();
    check(OTF2_DefReaderCallbacks_SetClockOffsetCallback(local_cb, local_clock_offset),
          "ClockOffset");
    check(OTF2_DefReaderCallbacks_SetUnknownCallback(local_cb, def_unknown), "Unknown");
    OTF2_EvtReaderCallbacks* local_evt_cb = OTF2_EvtReaderCallbacks_New();
    SET_EVENT_CALLBACKS(OTF2_EvtReaderCallbacks, local_evt_cb, per_location);
    uint64_t events = 0;
    for (size_t i = 0; i < locations.count; i++) {
        if (have_local_defs) {
            OTF2_DefReader* local = OTF2_Reader_GetDefReader(reader, locations.ids[i]);
            if (local) {
                check(OTF2_Reader_RegisterDefCallbacks(reader, local, local_cb, NULL),
                      "RegisterDefCallbacks");
                uint64_t read = 0;
                check(OTF2_Reader_ReadAllLocalDefinitions(reader, local, &read),
                      "ReadAllLocalDefinitions");
                definitions += read;
                check(OTF2_Reader_CloseDefReader(reader, local), "CloseDefReader");
            }
        }
        /* Merged: every location's event reader must exist before the global event reader is
         * asked for (it takes every event reader opened so far), each holding a chunk-sized
         * buffer. Per location: one reader at a time, read and closed at once. */
        OTF2_EvtReader* evt = OTF2_Reader_GetEvtReader(reader, locations.ids[i]);
        if (!evt) {
            fprintf(stderr, "otf2_read_noop: no event reader for location %" PRIu64 "\n",
                    locations.ids[i]);
            return 1;
        }
        if (per_location) {
            check(OTF2_Reader_RegisterEvtCallbacks(reader, evt, local_evt_cb, NULL),
                  "RegisterEvtCallbacks");
            uint64_t read = 0;
            check(OTF2_Reader_ReadAllLocalEvents(reader, evt, &read), "ReadAllLocalEvents");
            events += read;
            check(OTF2_Reader_CloseEvtReader(reader, evt), "CloseEvtReader");
        }
    }
    OTF2_DefReaderCallbacks_Delete(local_cb);
    if (have_local_defs) {
        check(OTF2_Reader_CloseDefFiles(reader), "CloseDefFiles");
    }

    if (!per_location) {
        OTF2_GlobalEvtReader* merged = OTF2_Reader_GetGlobalEvtReader(reader);
        OTF2_GlobalEvtReaderCallbacks* evt_cb = OTF2_GlobalEvtReaderCallbacks_New();
        SET_EVENT_CALLBACKS(OTF2_GlobalEvtReaderCallbacks, evt_cb, merged);
        check(OTF2_Reader_RegisterGlobalEvtCallbacks(reader, merged, evt_cb, NULL),
              "RegisterGlobalEvtCallbacks");
        OTF2_GlobalEvtReaderCallbacks_Delete(evt_cb);
        check(OTF2_Reader_ReadAllGlobalEvents(reader, merged, &events), "ReadAllGlobalEvents");
        check(OTF2_Reader_CloseGlobalEvtReader(reader, merged), "CloseGlobalEvtReader");
    }
    OTF2_EvtReaderCallbacks_Delete(local_evt_cb);
    check(OTF2_Reader_CloseEvtFiles(reader), "CloseEvtFiles");
    check(OTF2_Reader_Close(reader), "Close");
    printf("{\"locations\": %zu, \"definitions\": %" PRIu64 ", \"events\": %" PRIu64 "}\n",
           locations.count, definitions, events);
    free(locations.ids);
    return 0;
}
