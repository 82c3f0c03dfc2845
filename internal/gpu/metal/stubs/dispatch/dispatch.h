// Stub (see ../README.md): the libdispatch subset bridge.m uses, as declared when dispatch objects
// are Objective-C objects (OS_OBJECT_USE_OBJC, the default under ARC).
#pragma once
#include <stddef.h>
#include <stdint.h>
#import <Foundation/Foundation.h>

NS_ASSUME_NONNULL_BEGIN

@protocol OS_object <NSObject>
@end
@protocol OS_dispatch_object <OS_object>
@end
@protocol OS_dispatch_queue <OS_dispatch_object>
@end
@protocol OS_dispatch_data <OS_dispatch_object>
@end
@protocol OS_dispatch_group <OS_dispatch_object>
@end
typedef NSObject<OS_dispatch_queue> *dispatch_queue_t;
typedef NSObject<OS_dispatch_data> *dispatch_data_t;
typedef NSObject<OS_dispatch_group> *dispatch_group_t;
typedef void (^dispatch_block_t)(void);

#define DISPATCH_DATA_DESTRUCTOR_DEFAULT NULL

// Copies the bytes when destructor is DISPATCH_DATA_DESTRUCTOR_DEFAULT.
extern dispatch_data_t dispatch_data_create(const void *buffer, size_t size, dispatch_queue_t _Nullable queue,
                                            dispatch_block_t _Nullable destructor) NS_RETURNS_RETAINED;

// <dispatch/time.h>
typedef uint64_t dispatch_time_t;
#define NSEC_PER_SEC 1000000000ull
#define DISPATCH_TIME_NOW (0ull)
#define DISPATCH_TIME_FOREVER (~0ull)
extern dispatch_time_t dispatch_time(dispatch_time_t when, int64_t delta);

// <dispatch/group.h>
extern dispatch_group_t dispatch_group_create(void) NS_RETURNS_RETAINED;
extern intptr_t dispatch_group_wait(dispatch_group_t group, dispatch_time_t timeout);
extern void dispatch_group_enter(dispatch_group_t group);
extern void dispatch_group_leave(dispatch_group_t group);

NS_ASSUME_NONNULL_END
